// The collector's state: joins the node's ranks' records per (communicator, function, sequence),
// computes exact arrival skew and per-rank lateness, keeps bounded per-rank and per-collective
// windows, and runs straggler, hang and transport detection into alerts.
//
// Thread-safety: every public method locks mu_. The ingest thread writes (OnHello, OnRecords, ...,
// Tick); HTTP threads read through Read(). Memory is bounded by Config's caps whatever the traffic;
// whatever is dropped to stay within them is counted in State::counters.
//
// Ownership: a client is a connection, identified by the kernel (SO_PEERCRED pid and uid, given
// to NoteAccepted); nothing a peer says about itself is identity. A communicator is keyed by
// (owner uid, hash) (CommKey): each uid that announces a hash gets its own communicator, so
// another user announcing the same hash first takes nothing of it. Each of its ranks belongs to
// the client that announced that rank: records, in-flight state, CommEnd and guard verdicts for a
// rank are taken only from its client (a rank whose client is gone may be taken over by a client of
// the same uid: a reconnect). Rank indices are checked against the communicator's size. Each uid's
// state is charged against a budget (ranks, communicators, estimated bytes), so one user cannot
// crowd out another; ended state is shrunk and its memory handed back.
//
// Where each job lives (all Aggregator members run under mu_):
//   aggregator.cc        locking and dispatch: the public entries, Tick, firing and resolving
//   registry.cc          clients, ownership, per-uid budgets, find/create, ending and eviction
//   record_join.cc       a record through the join table (join_table.h) to a completed window,
//                        its lateness samples and the straggler detector (CompleteWindow)
//   hang_verdict_out.cc  hang verdicts sent back to the plugins
//   flight_wiring.cc     the flight history fed, the flight record written on a hang and on
//                        demand (flight_history.h), the first divergence before a stuck collective
//   snapshot_source.cc   the snapshots readers take
//   alerts/              one builder per alert kind, and AlertKey (alert ids)
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

#include "collector/aggregate/alert_book.h"
#include "collector/aggregate/baseline_store.h"
#include "collector/aggregate/cause_evidence.h"
#include "collector/aggregate/counters.h"
#include "collector/aggregate/flight_history.h"
#include "collector/aggregate/gpu_activity.h"
#include "collector/aggregate/hang_action.h"
#include "collector/aggregate/hang_detector.h"
#include "collector/aggregate/join_table.h"
#include "collector/aggregate/net_links.h"
#include "collector/aggregate/record_sink.h"
#include "collector/aggregate/slow_cause.h"
#include "collector/aggregate/snapshot.h"
#include "collector/aggregate/snapshot_source.h"
#include "collector/aggregate/stats.h"
#include "collector/aggregate/straggler_detector.h"
#include "collector/aggregate/time_breakdown.h"
#include "collector/aggregate/wait_evidence.h"
#include "collector/base/clock.h"
#include "collector/config/config.h"
#include "collector/ingest/ingest_consumer.h"
#include "collector/nic/nic_counters.h"
#include "common/fs_trust.h"
#include "schemas/wire/sentinel_wire.h"

namespace sentinel::collector {

struct ProcessState;

// One rank of one communicator.
struct RankState {
  uint64_t comm_hash = 0;
  int32_t rank = 0;
  int32_t nranks = 0;
  int client = -1;  // the connection feeding it (its owner), -1 when gone
  // That connection's process (State::processes), null while `client` is -1 or has none: set
  // and cleared with `client` (a process is erased only after it disconnected, which clears it
  // here first). Saves the per-record map lookups of the join's analyses.
  ProcessState* process = nullptr;
  int local_index = 0;  // position in CommState::members
  uint32_t pid = 0;     // its process's pid, from the kernel (SO_PEERCRED)
  uint32_t uid = 0;     // its process's uid, from the kernel
  bool active = true;
  uint64_t last_seq = 0;
  bool has_seq = false;
  std::array<uint64_t, kFuncSlots> last_seq_by_func{};
  std::array<uint64_t, kFuncSlots> count_by_func{};
  uint64_t collectives = 0;  // collective records (joined or not)
  uint64_t p2p = 0;
  uint64_t duplicates = 0;
  int64_t last_record_mono_ns = 0;
  Ring<RankSample> history;
  Histogram lateness;
  Histogram clock_free;
  std::array<std::unique_ptr<Histogram>, kSizeBuckets> duration;  // lazily, per size bucket
  bool straggler_firing = false;
  int64_t prev_end_ns = kUnset;  // end of its previous joined collective (compute segment start)
  uint32_t prev_ordinal = 0;     // that collective's ordinal (wire ordinal_lo), 0 unknown
  bool prev_gpu = false;         // that collective had GPU times (its end is the kernel's)
  // It sent a record its plugin's overhead budget thinned (kSentinelCollGpuSkipped or
  // kSentinelCollSampled): from then on (the budget never steps back up) a compute segment is
  // measured only between two consecutive collectives that both kept their GPU times.
  bool budget_sampled = false;
  bool ended = false;  // CommEnd received
  // Last SentinelWireInFlight (hang detection); inflight.last_update_ns is collector time.
  InFlightView inflight;
  uint16_t inflight_flags = 0;
  // Last time its own process showed progress on it: a record, or in-flight counters that moved.
  int64_t progress_mono_ns = 0;
  // Its flight history (owned by the aggregator's FlightHistory, made on first use; null when none
  // yet, or refused: `flight_refused`, its uid's share was spent then).
  FlightRankHistory* flight = nullptr;
  bool flight_refused = false;

  // Its communicator: only clients of the communicator's owner uid ever hold its ranks.
  CommKey comm_key() const { return {uid, comm_hash}; }
  RankKey key() const { return {comm_key(), rank}; }
};

struct CommState {
  uint64_t hash = 0;
  uint32_t uid = 0;    // the owning uid (kernel): the uid of the client that announced it
  int32_t nranks = 0;  // fixed by its first announcement; rank indices are checked against it
  int32_t nnodes = 0;
  // Its local ranks announce themselves from separate processes, each through its own drainer:
  // one rank's records can reach sentineld before another's CommInit. Until this time (its
  // creation + Aggregator::kJoinSettleNs), while fewer ranks are known here than its ranks per
  // node (nranks / nnodes, rounded up), no join completes: each waits for the ranks still to
  // announce themselves. 0: settled (the full set is known, or the time passed).
  int64_t settle_until_mono_ns = 0;
  std::string name;
  std::vector<RankState*> members;          // by local index
  absl::flat_hash_map<int32_t, int> index;  // rank -> local index
  int active_count = 0;
  std::array<std::unique_ptr<FuncRing>, kFuncSlots> rings;
  std::unique_ptr<StragglerDetector> straggler;
  std::unique_ptr<WaitEvidence>
      wait;                     // who the job waits for, every communicator (wait_evidence.h)
  bool has_inflight = false;    // some rank sends in-flight state: hangs are judged from it
  bool ended_resolved = false;  // its alerts were resolved as ended (until a rank is back)
  HangActionState hang_action;  // hang verdicts sent to its waiting ranks (hang_action.h)
  uint64_t paused_logged_ordinal = 0;  // the stuck collective whose paused verdict was logged
  // The stuck collective whose flight record was taken (once per stuck collective), the file it
  // went to, or why it was not written.
  uint64_t flight_ordinal = 0;
  std::string flight_path;
  std::string flight_error;
  bool flight_failed = false;  // the write failed (`flight_error` says why)
  // Where its local ranks first diverged before the stuck collective (their histories), found
  // once per stuck collective and operations seen: the text, empty when they never did.
  uint64_t divergence_ordinal = 0;
  uint64_t divergence_ops = 0;
  std::string divergence_text;
  CommTime time;  // its least transfer floors (time_breakdown.h)
  uint64_t joined = 0;
  int64_t last_activity_mono_ns = 0;
  int64_t ended_mono_ns = 0;  // when its last active local rank ended (series retention)
  std::array<std::array<uint64_t, kSizeBuckets>, kFuncSlots> joined_by_func_bucket{};
  std::array<Histogram, kSizeBuckets> skew;
  int64_t charged_ring_bytes = 0;  // its join windows, as charged to its uid's budget

  CommKey key() const { return {uid, hash}; }
  // Its ranks on this node if they are spread evenly over its nodes (rounded up), 0 while its
  // node count is not known (no CommInit yet).
  int32_t RanksPerNode() const { return nnodes > 0 ? (nranks + nnodes - 1) / nnodes : 0; }
  // Whether its joins are held for ranks still to announce themselves (settle_until_mono_ns).
  bool HoldsJoins(int64_t now) const {
    return settle_until_mono_ns != 0 && now < settle_until_mono_ns &&
           static_cast<int32_t>(members.size()) < RanksPerNode();
  }
};

struct ProcessState {
  int client = -1;
  uint32_t pid = 0;           // SO_PEERCRED (0: not known)
  uint32_t uid = UINT32_MAX;  // SO_PEERCRED (UINT32_MAX: not known)
  uint32_t claimed_pid = 0;   // what its hello said: shown beside pid, never used as identity
  std::string host;           // sentineld's own host name: every client is on this node
  std::string job_id;
  bool connected = true;
  int64_t connected_real_ns = 0;
  int64_t mono_to_real_ns = 0;  // from the hello
  SentinelWireHeartbeat heartbeat{};
  bool has_heartbeat = false;
  double overhead_ratio = -1;  // callback ns per wall ns between the last two heartbeats
  SentinelWireGpuWindow gpu_window{};
  bool has_gpu_window = false;
  GpuActivity gpu;             // CUPTI windows and kernel attributions (gpu_activity.h)
  ProcessTime time;            // where its time went (time_breakdown.h)
  std::vector<RankKey> ranks;  // the ranks it fed
  // Last GPU window showing work outside NCCL (CUPTI): its host thread is launching kernels.
  int64_t compute_progress_mono_ns = 0;
  // Guard verdicts for a communicator it had not announced yet (the verdict may overtake the
  // CommInit): replayed once it announces a rank there, bounded.
  std::vector<SentinelWireVerdict> pending_verdicts;
};

// One uid's share of the state (its budget, Aggregator::kUidBudget*).
struct UidUsage {
  int64_t ranks = 0;
  int64_t comms = 0;
  int64_t bytes = 0;  // estimated: ranks' windows and communicators' join windows
};

// A joined collective, kept for /v1/telemetry.
struct CollSummary {
  int64_t end_mono_ns = 0;
  uint64_t comm_hash = 0;
  uint32_t uid = 0;  // the communicator's owner
  uint64_t bytes = 0;
  int64_t skew_ns = 0;
  int64_t duration_ns = -1;  // longest local GPU duration
  int64_t latency_ns = -1;   // latest end - earliest arrival
  double busbw_gbps = -1;    // GB/s (gigabytes per second, nccl-tests' busbw), -1 unknown
  uint8_t func = 0;
  int32_t ranks = 0;
};

struct State {
  std::string host;
  int64_t start_real_ns = 0;
  int64_t start_mono_ns = 0;
  int64_t now_mono_ns = 0;  // as of the last tick (in-flight ages)
  Counters counters;
  absl::flat_hash_map<CommKey, std::unique_ptr<CommState>> comms;
  absl::flat_hash_map<RankKey, std::unique_ptr<RankState>> ranks;
  absl::flat_hash_map<int, std::unique_ptr<ProcessState>> processes;
  absl::flat_hash_map<uint32_t, UidUsage> uid_usage;
  std::deque<int> gone_processes;  // disconnected, oldest first (bounded)
  Ring<CollSummary> collectives;
  std::vector<HangSuspect> hang_suspects;
  std::vector<std::pair<CommKey, HangVerdict>> hangs;  // in-flight verdicts of the last tick
  AlertBook alerts{3600LL * 1000000000, 1024};
  NicState nic;  // sysfs NIC counters (collector/nic/), empty when --nic-poll 0
  // The latest sentinel-baseline run (wire type 12).
  BaselineStore baseline;
  NetLinks net;    // links of the wrapping net plugin (wire types 10/11, net_links.h)
  SlowCause slow;  // why collectives are slow: late ranks vs network (slow_cause.h)
  // Why a rank is late: the node's evidence (collector/evidence/; null when the poll is off) and
  // the last verdict per late rank (cause_evidence.h; a cache, hence mutable in const readers).
  const EvidencePoller* evidence = nullptr;
  mutable CauseCache causes;
  LateCauseParams cause_params;  // CauseParamsFrom(config), set by the aggregator
};

class Aggregator : public IngestConsumer, public NicPollConsumer, public SnapshotSource {
 public:
  // Per-uid budget: the share of --max-ranks / --max-comms one user's clients may hold, and the
  // estimated bytes of their windows (a rank's history, a communicator's join windows). A real
  // job's ranks on one node need far less (8 GPUs x 64 communicators: ~512 ranks, ~60 MB).
  static constexpr int kUidBudgetShareDivisor = 2;  // of --max-ranks and --max-comms
  static constexpr int64_t kUidBudgetBytes = int64_t{96} << 20;
  // Each uid's flight histories together (flight_history.h), a share of their own so that the
  // record never takes room from detection: 64 MiB is 460 ranks at --flight-ops 2000. A rank past
  // it keeps no history (counted).
  static constexpr int64_t kUidFlightBudgetBytes = int64_t{64} << 20;
  // Flight record files of each kind (hang, on demand) kept in the directory, the newest: a
  // flapping job cannot fill the disk, nor can requests push out the records of hangs.
  static constexpr size_t kFlightFilesKept = 32;
  // Ended communicators (no active local rank) kept per uid for the API, most recent first.
  static constexpr int kEndedCommsPerUid = 32;
  static constexpr int64_t kEndedRanksPerUid = 256;
  // Guard verdicts waiting for their communicator's announcement, per client.
  static constexpr size_t kPendingVerdictsPerClient = 8;
  // How long a new communicator's joins wait for its local ranks to announce themselves
  // (CommState::settle_until_mono_ns): drainers send every 100 ms; a busy host delays one by far
  // less than this.
  static constexpr int64_t kJoinSettleNs = 2LL * 1000000000;

  Aggregator(const Config& config, Clock* clock);
  ~Aggregator() override;

  // IngestSink (ingest thread).
  void OnHello(int client, const SentinelWireHello& hello) override;
  void OnRecords(int client, const SentinelWireCollRecord* records, size_t n) override;
  void OnControlFrame(int client, const Frame& frame) override;
  void OnDisconnect(int client) override;

  // IngestConsumer: connection bookkeeping from the server.
  void NoteAccepted(int client, uint32_t pid, uint32_t uid) override;
  void NoteRefused(const char* reason) override;
  void NoteClosed(int client, CloseReason reason, uint64_t frames,
                  uint64_t unknown_skipped) override;

  // One NIC poll's readings (NicPoller thread): deltas, rates, nic_errors / link_degraded alerts.
  void OnNicPoll(const std::vector<NicPortReading>& readings) override;

  // Periodic: hang detection, eviction of idle state. Call every Config::tick_ns.
  void Tick() override;

  void SetRecordLog(RecordSink* log);
  // The node's evidence of why ranks are late (main.cc's poller; null: none). It must outlive its
  // use: main.cc sets null before stopping it.
  void SetEvidence(const EvidencePoller* evidence);
  // The pids of the rank processes connected now (the evidence poller's thread).
  std::vector<uint32_t> LivePids() const;

  // Runs `fn` with the state under the lock (readers: exporters).
  void Read(const std::function<void(const State&)>& fn) const;
  // Alerts whose state changed since the last call (for the Alertmanager push).
  std::vector<Alert> TakeAlertChanges() override;
  // Frames for plugin connections (client id, whole frame bytes): the hang verdicts (wire type
  // 13) of the last ticks. The ingest thread sends them after Tick().
  std::vector<std::pair<int, std::string>> TakeOutbound() override;
  const Config& config() const override { return config_; }
  Clock* clock() const override { return clock_; }

  // SnapshotSource (HTTP server, Alertmanager pusher): copies under Read (snapshot_source.cc).
  MetricsSnapshot SnapshotMetrics(const ExcludePolicy& exclude, int64_t now_real_ns,
                                  std::vector<ExcludedHost>* excluded) const override;
  HealthSnapshot SnapshotHealth() const override;
  RanksSnapshot SnapshotRanks(const ApiViewer& viewer) const override;
  TelemetrySnapshot SnapshotTelemetry(int64_t window_ns, int64_t now_mono_ns,
                                      const ApiViewer& viewer) const override;
  TraceSnapshot SnapshotTrace(int64_t since_ns, const ApiViewer& viewer) const override;
  std::vector<Alert> SnapshotAlerts(const ApiViewer& viewer) const override;
  std::vector<ExcludedHost> SnapshotExclusions(const ExcludePolicy& exclude,
                                               int64_t now_real_ns) const override;
  std::vector<Alert> FiringAlerts() const override;
  FlightRecordAnswer RecordFlight(const FlightRequester& who,
                                  std::optional<uint64_t> comm) override;

  // The flight histories (tests).
  uint64_t FlightRanks() const;
  uint64_t FlightRefused() const;

 private:
  // A flight record taken under the lock, to be written after it (flight_wiring.cc).
  struct PendingFlight {
    std::string path;
    FlightRecord record;
    CommKey comm;  // the hung communicator; uid kNoUid on demand
    uint64_t ordinal = 0;
  };
  // The rank's flight history, made on first use (null: none, refused or --flight-ops 0).
  FlightRankHistory* FlightOf(RankState* rs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetFlight(RankState* rs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The directory flight records go to (the record log's); empty: none are written.
  std::string FlightDir() const;
  // The communicators a hung one's record holds: itself, then those its local ranks' processes
  // are inside now (the waits a cycle or a victim passes through).
  std::vector<CommKey> FlightComms(const CommState& comm, const HangVerdict& v) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A record's header: this node, its clocks read together, why.
  void FillFlightHeader(FlightRecord* r, const char* reason) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once per stuck collective: takes its flight record (written after the lock, WriteFlights)
  // and points the alert to the file; on every tick, keeps the pointer in the alert.
  void NoteHangFlight(CommState* comm, const HangVerdict& v, Alert* alert)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ranks disagree at the stuck collective: where their histories first diverged, when that is
  // earlier, is added to the verdict's mismatch text.
  void AddFirstDivergence(CommState* comm, const std::vector<InFlightView>& views, HangVerdict* v)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes and prunes (never under the lock); a failed write is noted on its communicator.
  void WriteFlights(std::vector<PendingFlight> flights) ABSL_LOCKS_EXCLUDED(mu_);
  void TickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The communicator `hash` as `client` may use it: the client's uid's own one of that hash
  // (another user's of the same hash is a different communicator) with the same size, or a new one
  // charged to that uid. nullptr when refused (counted).
  CommState* FindOrCreateComm(uint64_t hash, int32_t nranks, int client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ClientMayAddRank(int client) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rank as `client` may write it: its own, a new one it announces (create), or one whose
  // client is gone, taken over by a client of the same uid. nullptr when refused (counted).
  RankState* FindOrCreateRank(CommState* comm, int32_t rank, int client, bool create = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint32_t ClientUid(int client) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ClientOwnsComm(int client, uint64_t hash) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ClientOwnsRank(int client, uint64_t hash, int32_t rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t UidLimitRanks() const;
  int64_t UidLimitComms() const;
  // Charges (or, negative, credits) `bytes` of estimated state to `uid`.
  void Charge(uint32_t uid, int64_t ranks, int64_t comms, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RechargeRings(CommState* comm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t RankBytes() const;
  // Drops a communicator and its ranks, crediting its uid.
  void EraseComm(const CommKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A communicator with no active local rank left: its join windows go, its ranks' histories
  // shrink to what they hold (the API still shows them).
  void ReleaseEnded(CommState* comm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps at most kEndedCommsPerUid / kEndedRanksPerUid ended communicators per uid.
  void TrimEnded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReplayPendingVerdicts(int client, uint64_t hash) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the hang verdict may be acted on: every culprit and waiting rank belongs to one uid
  // and each culprit's role rests on its own process's evidence (its own in-flight state, or its
  // own connection's end).
  bool HangEvidenceOwned(const CommState& comm, const HangVerdict& v) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Last time rank `m`'s process made progress outside communicator `comm` (0: never).
  int64_t ProgressElsewhere(const CommState& comm, const RankState& m) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Nothing of rank `m`'s process is in flight in any of its communicators on this node, by their
  // latest states, and the process is connected.
  bool OutsideNccl(const RankState& m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps `view`'s outside_nccl and since when; once outside for 2 s, what /proc shows of the
  // process (at most once a second): whether it works there is then known for the hang verdict
  // and for /metrics (sentinel_inflight_paused_outside_nccl), whether or not this node is hung.
  void NoteOutside(const RankState& m, int64_t now, InFlightView* view) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr int64_t kOutsideLookAfterNs = 2LL * 1000000000;  // two polls: a window
  static constexpr int64_t kOutsideLookEveryNs = 1LL * 1000000000;  // the poll's own period
  // Some never_launched culprit of `v` is outside NCCL and its /proc not read since it left (so
  // whether it is paused is not known yet), for at most the look-after delay and one poll.
  bool OutsideUnread(const CommState& comm, const HangVerdict& v, int64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Where the evidence poller reads rank `m`'s /proc: its state, CPU use and I/O over the last
  // `span_ns` (2 to 10 s), into `view` (left unknown otherwise).
  void NoteProcess(const RankState& m, int64_t now, int64_t span_ns, InFlightView* view) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A hung communicator of this tick, before its alert fires.
  struct HungComm {
    CommKey key;
    CommState* comm = nullptr;
    HangVerdict verdict;
    HangAction action = HangAction::kNone;
  };
  // The wait-for graph across the hung communicators (wait_cycle.h): each cycle's text goes into
  // the verdict of every communicator it passes through (hang_cycles.cc).
  void NoteWaitCycles(std::vector<HungComm>* hung) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One log line per stuck collective whose verdict is `paused` (no alert says it).
  void LogPausedOnce(CommState& comm, const HangVerdict& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Ingest(int client, const SentinelWireCollRecord& rec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  FuncRing* Ring(CommState* comm, int func) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnsureWidth(CommState* comm, FuncRing* ring) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllActiveReported(const CommState& comm, const FuncRing& ring, size_t slot) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Complete(CommState* comm, int func, FuncRing* ring, size_t slot, bool partial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A collective every active local rank reported (Complete, not partial): the communicator's
  // counters and skew, the telemetry summary, and the straggler detector on its lateness. The
  // reporting ranks' local indices are in scratch_idx_, their lateness and compute segments in
  // scratch_late_ and scratch_seg_ (Complete fills them).
  void CompleteWindow(CommState* comm, int func, const JoinSlot& slot, const JoinExtent& extent,
                      int bucket, bool warm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecheckPending(CommState* comm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the communicator's settling once it no longer holds its joins (CommState::HoldsJoins)
  // and completes those that waited; EndSettle ends it now.
  void MaybeEndSettle(CommState* comm, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndSettle(CommState* comm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deactivate(RankState* rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvaluateStragglers(CommState* comm, int func, int bucket, const std::vector<int>& idx,
                          const std::vector<int64_t>& lateness,
                          const std::vector<int64_t>& segments, uint64_t seq)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FireStraggler(CommState* comm, RankState* rs, int func, int bucket)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fire(Alert alert) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Resolve(uint32_t owner_uid, const std::string& id,
               ResolveReason reason = ResolveReason::kCleared) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnInFlight(int client, const SentinelWireInFlight& in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvaluateHangs(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FireHang(CommState* comm, const HangVerdict& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a SentinelWireHangVerdict for every process with a waiting rank (hang_action.h).
  void SendHangVerdict(const CommState& comm, const HangVerdict& v)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Resolves the communicator's firing alerts with reason `ended` once no local rank is active.
  void MaybeEndComm(CommState* comm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvaluateNicAlerts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvaluateNetLinkAlerts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // net_links.h hook
  void EvaluateWaitAlerts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);     // wait_alerts.h hook
  // Evicts one communicator to make room for `uid`: an ended one of any uid, else the least
  // recently active of `uid` itself (never another user's live one). False when none qualifies.
  bool EvictIdleComm(uint32_t uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleVerdict(int client, const SentinelWireVerdict& verdict)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Config config_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_);
  FlightHistory flight_ ABSL_GUARDED_BY(mu_);
  std::vector<PendingFlight> pending_flights_ ABSL_GUARDED_BY(mu_);
  // The last on-demand record per requesting uid (at most one a second each).
  absl::flat_hash_map<uint32_t, int64_t> last_on_demand_ ABSL_GUARDED_BY(mu_);
  const rules::TrustedUids trusted_;  // who may own the directory records are written to
  RecordSink* record_log_ ABSL_GUARDED_BY(mu_) = nullptr;
  // One-entry cache: consecutive records nearly always hit the same (comm, rank).
  RankState* last_rank_ ABSL_GUARDED_BY(mu_) = nullptr;
  CommState* last_comm_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t batch_now_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int> scratch_idx_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> scratch_late_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> scratch_seg_ ABSL_GUARDED_BY(mu_);
  std::vector<StragglerDetector::Observation> scratch_obs_ ABSL_GUARDED_BY(mu_);
  std::vector<StragglerEvent> scratch_events_ ABSL_GUARDED_BY(mu_);
  std::vector<WaitObservation> scratch_wait_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, std::string>> outbound_ ABSL_GUARDED_BY(mu_);
  int64_t released_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // freed since the last malloc_trim
  int64_t last_trim_mono_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

StragglerParams StragglerParamsFrom(const Config& config);
WaitParams WaitParamsFrom(const Config& config);

}  // namespace sentinel::collector
