// The op schema table and the CPU kernel table agree: every op vlrt knows runs on the
// CPU reference (a kernel, or a view the executor makes), and every kernel has a schema.
#include <gtest/gtest.h>

#include "backends/cpu/kernel.h"
#include "ops/op_schema.h"

namespace vlrt {

TEST(OpTables, EverySchemaHasACpuKernelOrIsAView) {
  for (auto& [op, schema] : op_schemas()) {
    bool view = schema.alias_input >= 0;
    if (schema.control_flow) {  // the executor runs its subgraphs
      EXPECT_EQ(find_cpu_kernel("", op), nullptr) << op << ": control flow has no kernel";
      continue;
    }
    EXPECT_TRUE(view || find_cpu_kernel("", op)) << op << " has a schema but no CPU kernel and is no view";
    EXPECT_FALSE(view && schema.in_place) << op << ": a view cannot also run in place";
    EXPECT_FALSE(view && schema.data_dependent_shape) << op << ": a view's shape comes from its input";
  }
}

TEST(OpTables, EveryCpuKernelHasASchema) {
  for (auto& [op, kernel] : cpu_kernels()) {
    EXPECT_NE(find_schema("", op), nullptr) << "the CPU kernel " << op << " has no schema";
    EXPECT_NE(kernel.fn, nullptr) << op;
  }
}

TEST(OpTables, InPlaceOpsAreOneInputElementPerOutputElement) {
  // In place is only sound where output element i reads input element i alone: unary
  // and broadcasting binary elementwise ops.
  for (const char* op : {"Relu", "Add", "Mul", "HardSwish"}) {
    const OpSchema* s = find_schema("", op);
    ASSERT_NE(s, nullptr) << op;
    EXPECT_TRUE(s->in_place) << op;
  }
  for (const char* op : {"Conv", "MatMul", "Softmax", "Transpose", "Concat"}) EXPECT_FALSE(find_schema("", op)->in_place) << op;
  EXPECT_TRUE(find_schema("", "NonZero")->data_dependent_shape);
}

}  // namespace vlrt
