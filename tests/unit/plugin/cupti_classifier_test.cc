// Kernel name classification across NCCL 2.18-2.30 naming
// (docs/cupti-verbs-facts.md "1.8 Recognising NCCL kernels by name").
#include <gtest/gtest.h>

#include <string>

#include "plugin/cupti/kernel_class.h"

namespace sentinel::plugin::cupti {
namespace {

TEST(KernelClassifierTest, NcclNamesAcrossVersions) {
  KernelClassifier c;
  for (const char* name : {
           "_Z41ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclWorkElem",  // <= 2.18
           "ncclKernel_AllReduce_RING_LL_Sum_float",
           "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE",
           "ncclDevKernel_Generic", "_Z24ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE",
           "ncclSymDevKernel_AllReduce_RSxLD_AGxST_sum_f32",             // 2.27 symmetric memory
           "_Z29ncclSymkDevKernel_AllGather_ST21ncclSymkDevWorkArgs4K",  // >= 2.28
           "_ZN12_GLOBAL__N_113oneRankReduceIfEEvPT_S2_m",               // nranks == 1
       }) {
    EXPECT_EQ(c.Classify(name), KernelClass::kNccl) << name;
    EXPECT_EQ(c.ClassifyCached(name), KernelClass::kNccl) << name;
  }
}

TEST(KernelClassifierTest, ComputeNames) {
  KernelClassifier c;
  for (const char* name :
       {"_Z11gemm_kernelPKfS0_Pfiii", "void at::native::vectorized_elementwise_kernel<4>",
        "sm90_xmma_gemm_f16f16_f16f32", "nccl_like_but_not", ""}) {
    EXPECT_EQ(c.Classify(name), KernelClass::kCompute) << name;
  }
  EXPECT_EQ(c.Classify(nullptr), KernelClass::kCompute);
  EXPECT_EQ(c.ClassifyCached(nullptr), KernelClass::kCompute);
}

TEST(KernelClassifierTest, ExtraPatternsFromTheEnvironment) {
  KernelClassifier c("nvshmemi_,,custom_allreduce");
  EXPECT_EQ(c.Classify("nvshmemi_transfer_kernel"), KernelClass::kNccl);
  EXPECT_EQ(c.Classify("_Z16custom_allreducev"), KernelClass::kNccl);
  EXPECT_EQ(c.Classify("gemm"), KernelClass::kCompute);
}

TEST(KernelClassifierTest, CacheIsKeyedByPointerAndHits) {
  KernelClassifier c;
  std::string nccl = "ncclDevKernel_Generic";
  std::string gemm = "gemm";
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(c.ClassifyCached(nccl.c_str()), KernelClass::kNccl);
    EXPECT_EQ(c.ClassifyCached(gemm.c_str()), KernelClass::kCompute);
  }
  EXPECT_EQ(c.cache_misses(), 2u);
}

}  // namespace
}  // namespace sentinel::plugin::cupti
