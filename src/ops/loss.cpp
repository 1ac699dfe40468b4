#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

void register_loss_schemas(SchemaTable& t) { (void)t; }

}  // namespace vlrt
