// An operation's signature from what the plugin sees (op_signature.h): built from records, compared
// only on the fields both sides know, and quoted as the hang alerts will quote it.
#include "collector/aggregate/op_signature.h"

#include <string>

#include "gtest/gtest.h"

#include "tests/unit/collector/op_signature_test_util.h"

namespace sentinel::collector {
namespace {

using testing::kBf16;
using testing::kFp32;
using testing::kInt8;
using testing::kMax;
using testing::kMiB;
using testing::kSum;
using testing::SigOf;

SentinelWireCollRecord Record(uint8_t func, uint64_t bytes, uint8_t datatype, int32_t root) {
  SentinelWireCollRecord r{};
  r.func = func;
  r.bytes = bytes;
  r.datatype = datatype;
  r.root = root;
  r.peer = -1;
  return r;
}

TEST(OpSignatureTest, FromACollectiveRecord) {
  const OpSignature s = SignatureFromRecord(Record(kSentinelFuncAllReduce, 16 * kMiB, kBf16, 3));
  EXPECT_EQ(s.func, kSentinelFuncAllReduce);
  ASSERT_TRUE(s.bytes.has_value());
  EXPECT_EQ(*s.bytes, 16 * kMiB);
  EXPECT_EQ(s.datatype, kBf16);
  ASSERT_TRUE(s.root.has_value());
  EXPECT_EQ(*s.root, -1);              // not a rooted operation, whatever the record's field holds
  EXPECT_FALSE(s.red_op.has_value());  // the profiler's Coll event has no reduction
  EXPECT_EQ(s.direction, P2pDirection::kNone);
  EXPECT_EQ(SignatureText(s), "AllReduce 16 MiB bf16");
}

TEST(OpSignatureTest, BroadcastKeepsItsRootAndHidesTheByteDatatype) {
  const OpSignature s = SignatureFromRecord(Record(kSentinelFuncBroadcast, 16 * kMiB, kInt8, 1));
  ASSERT_TRUE(s.root.has_value());
  EXPECT_EQ(*s.root, 1);
  // NCCL describes Broadcast and AllGather in bytes as ncclInt8: the user's type is not known.
  EXPECT_EQ(s.datatype, kSentinelDatatypeUnknown);
  EXPECT_EQ(SignatureText(s), "Broadcast 16 MiB root 1");
  const OpSignature g = SignatureFromRecord(Record(kSentinelFuncAllGather, 4 * kMiB, kInt8, -1));
  EXPECT_EQ(g.datatype, kSentinelDatatypeUnknown);
  // So a record's AllGather never differs from a fuller source's bf16 AllGather of the same size.
  EXPECT_EQ(ConflictingFields(g, SigOf(kSentinelFuncAllGather, 4 * kMiB, kBf16)), 0u);
}

TEST(OpSignatureTest, FromP2pRecords) {
  SentinelWireCollRecord r = Record(kSentinelFuncSend, kMiB, kFp32, -1);
  r.flags = kSentinelCollIsP2p;
  r.peer = 5;
  OpSignature s = SignatureFromRecord(r);
  EXPECT_EQ(s.direction, P2pDirection::kSend);
  EXPECT_EQ(s.peer, 5);
  EXPECT_EQ(SignatureText(s), "Send 1 MiB to rank 5");
  r.func = kSentinelFuncRecv;
  s = SignatureFromRecord(r);
  EXPECT_EQ(s.direction, P2pDirection::kRecv);
  EXPECT_EQ(SignatureText(s), "Recv 1 MiB from rank 5");
  // A piece whose collective name was recovered (AlltoAll) no longer says its direction.
  r.func = kSentinelFuncAlltoAll;
  r.flags = kSentinelCollIsP2p | kSentinelCollFuncRecovered;
  s = SignatureFromRecord(r);
  EXPECT_EQ(s.direction, P2pDirection::kUnknown);
  EXPECT_EQ(SignatureText(s), "AlltoAll 1 MiB with rank 5");
}

TEST(OpSignatureTest, FromTheInFlightState) {
  SentinelWireInFlight in{};
  in.enqueued = 1041;
  in.completed = 1040;
  in.oldest_func = kSentinelFuncBroadcast;
  in.oldest_bytes = 16 * kMiB;
  in.oldest_root = 1;
  in.oldest_datatype = kInt8;
  // A minor-0 plugin's frame: its function only.
  EXPECT_EQ(SignatureText(SignatureFromInFlight(in)), "Broadcast");
  in.flags = kSentinelInFlightSignature;
  EXPECT_EQ(SignatureText(SignatureFromInFlight(in)), "Broadcast 16 MiB root 1");
  in.oldest_func = kSentinelFuncAllReduce;
  in.oldest_datatype = kBf16;
  const OpSignature ar = SignatureFromInFlight(in);
  EXPECT_EQ(SignatureText(ar), "AllReduce 16 MiB bf16");
  ASSERT_TRUE(ar.root.has_value());
  EXPECT_EQ(*ar.root, -1);
  // Nothing in flight: oldest_func's 0 is no Broadcast.
  in.completed = 1041;
  in.oldest_func = kSentinelFuncBroadcast;
  EXPECT_FALSE(SignatureKnown(SignatureFromInFlight(in)));
}

TEST(OpSignatureTest, AnUnknownFunctionLeavesTheWholeRecordUnknown) {
  const OpSignature s = SignatureFromRecord(Record(kSentinelFuncUnknown, kMiB, kFp32, 0));
  EXPECT_FALSE(SignatureKnown(s));
  EXPECT_FALSE(s.bytes.has_value());
  EXPECT_EQ(SignatureText(s), "unknown");
}

TEST(OpSignatureTest, TextsAsTheAlertsQuoteThem) {
  OpSignature ar = SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16);
  ar.red_op = kSum;
  EXPECT_EQ(SignatureText(ar), "AllReduce 16 MiB bf16 sum");
  EXPECT_EQ(SignatureText(SigOf(kSentinelFuncAllGather, 4 * kMiB, kBf16)), "AllGather 4 MiB bf16");
  EXPECT_EQ(SignatureText(SigOf(kSentinelFuncBroadcast, 16 * kMiB, kFp32, 1)),
            "Broadcast 16 MiB fp32 root 1");
  EXPECT_EQ(SignatureText(SignatureFromFunc(kSentinelFuncReduceScatter)), "ReduceScatter");
  EXPECT_EQ(SignatureText(OpSignature{}), "unknown");
}

TEST(OpSignatureTest, ExactSizesNeverReadTheSame) {
  EXPECT_EQ(ExactBytesText(4 * kMiB), "4 MiB");
  EXPECT_EQ(ExactBytesText(1536 * 1024), "1536 KiB");
  EXPECT_EQ(ExactBytesText(4 * kMiB + 4), "4194308 B");
  EXPECT_EQ(ExactBytesText(100), "100 B");
  EXPECT_EQ(ExactBytesText(0), "0 B");
  EXPECT_EQ(ExactBytesText(uint64_t{3} << 40), "3 TiB");
  EXPECT_EQ(ExactBytesText(uint64_t{1} << 50), "1024 TiB");
}

TEST(OpSignatureTest, ShortNamesOfEveryDatatypeAndReduction) {
  const char* expected[] = {"int8", "uint8", "int32", "uint32", "int64",   "uint64",
                            "fp16", "fp32",  "fp64",  "bf16",   "fp8e4m3", "fp8e5m2"};
  for (uint8_t d = 0; d < 12; ++d) EXPECT_EQ(ShortDatatypeName(d), expected[d]) << int{d};
  EXPECT_EQ(ShortDatatypeName(12), "unknown");
  EXPECT_EQ(ShortDatatypeName(kSentinelDatatypeUnknown), "unknown");
  EXPECT_EQ(RedOpName(kSum), "sum");
  EXPECT_EQ(RedOpName(4), "avg");
  EXPECT_EQ(RedOpName(7), "op 7");
  EXPECT_EQ(CommHex(0xab), "0x00000000000000ab");
}

TEST(OpSignatureTest, ConflictsOnlyOnFieldsBothKnow) {
  const OpSignature ar = SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16);
  EXPECT_EQ(ConflictingFields(ar, ar), 0u);
  EXPECT_EQ(ConflictingFields(ar, SigOf(kSentinelFuncAllGather, 16 * kMiB, kBf16)), kSigFunc);
  EXPECT_EQ(ConflictingFields(ar, SigOf(kSentinelFuncAllReduce, 4 * kMiB, kBf16)), kSigBytes);
  EXPECT_EQ(ConflictingFields(ar, SigOf(kSentinelFuncAllReduce, 16 * kMiB, kFp32)), kSigDatatype);
  EXPECT_EQ(ConflictingFields(SigOf(kSentinelFuncBroadcast, kMiB, kFp32, 0),
                              SigOf(kSentinelFuncBroadcast, kMiB, kFp32, 1)),
            kSigRoot);
  EXPECT_EQ(SignatureFieldsText(kSigFunc | kSigBytes | kSigRoot), "function, size, root");
  // Only the function known (the in-flight state): no difference in what it does not know.
  EXPECT_EQ(ConflictingFields(ar, SignatureFromFunc(kSentinelFuncAllReduce)), 0u);
  // A reduction known on one side only is never a difference; known on both, it is.
  OpSignature sum = ar;
  sum.red_op = kSum;
  EXPECT_EQ(ConflictingFields(ar, sum), 0u);
  OpSignature max = ar;
  max.red_op = kMax;
  EXPECT_EQ(ConflictingFields(sum, max), kSigRedOp);
  // Unknown on one side: nothing is compared, not even the function.
  EXPECT_EQ(ConflictingFields(ar, OpSignature{}), 0u);
  EXPECT_FALSE(SignaturesConflict(OpSignature{}, SigOf(kSentinelFuncAllGather, 1, kBf16)));
  // Identity keeps what is unknown apart, for grouping.
  EXPECT_TRUE(SameSignature(ar, ar));
  EXPECT_FALSE(SameSignature(ar, SignatureFromFunc(kSentinelFuncAllReduce)));
  EXPECT_NE(SignatureBefore(ar, sum), SignatureBefore(sum, ar));
}

// The digest the job-wide rules compare: equal for equal signatures, different when any field or
// whether it is known differs, exact as a double, and the same number in every build (a fixed
// value: a seeded hash would differ between two nodes' daemons).
TEST(OpSignatureTest, DigestIsStableExactAndTellsSignaturesApart) {
  const OpSignature a = SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16);
  const uint64_t da = SignatureDigest(a);
  EXPECT_EQ(da, SignatureDigest(SigOf(kSentinelFuncAllReduce, 16 * kMiB, kBf16)));
  EXPECT_NE(da, 0u);
  EXPECT_LT(da, uint64_t{1} << 48);
  EXPECT_EQ(static_cast<uint64_t>(static_cast<double>(da)), da);
  EXPECT_NE(da, SignatureDigest(SigOf(kSentinelFuncAllGather, 16 * kMiB, kBf16)));
  EXPECT_NE(da, SignatureDigest(SigOf(kSentinelFuncAllReduce, 4 * kMiB, kBf16)));
  EXPECT_NE(da, SignatureDigest(SigOf(kSentinelFuncAllReduce, 16 * kMiB, kFp32)));
  EXPECT_NE(SignatureDigest(SigOf(kSentinelFuncBroadcast, kMiB, kBf16, 0)),
            SignatureDigest(SigOf(kSentinelFuncBroadcast, kMiB, kBf16, 1)));
  // A field known on one side only is a different digest (the rules compare digests, not
  // fields: ranks on one NCCL report the same fields).
  OpSignature no_dtype = a;
  no_dtype.datatype = kSentinelDatatypeUnknown;
  EXPECT_NE(da, SignatureDigest(no_dtype));
  EXPECT_EQ(SignatureDigest(OpSignature{}), 0u);
  // Pinned: the digest must not change between releases, or nodes on two versions would disagree.
  EXPECT_EQ(da, uint64_t{149101467473106});
}

}  // namespace
}  // namespace sentinel::collector
