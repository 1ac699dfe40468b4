#include "ops/op_schema.h"
#include "ops/shape_util.h"

namespace vlrt {

void register_tensor_schemas(SchemaTable& t) { (void)t; }

}  // namespace vlrt
