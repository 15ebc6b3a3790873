//! The perf.data ABI constants profgen reads (and `profgen-record` writes): record types, header
//! `misc` bits, `perf_event_attr` sample/read/branch flags, feature ids. Values from the kernel's
//! include/uapi/linux/perf_event.h and perf's tools/lib/perf/include/perf/event.h and
//! tools/perf/util/header.h.

/// The file and pipe header magic.
pub const MAGIC: &[u8; 8] = b"PERFILE2";
/// magic, size, attr_size, 3 sections of (offset, size), 256-bit feature bitmap.
pub const FILE_HEADER_SIZE: usize = 104;
/// A (offset, size) file section.
pub const FILE_SECTION_SIZE: u64 = 16;

// Record types: kernel ones, then perf's own.
pub const RECORD_MMAP: u32 = 1;
pub const RECORD_LOST: u32 = 2;
pub const RECORD_COMM: u32 = 3;
pub const RECORD_EXIT: u32 = 4;
pub const RECORD_FORK: u32 = 7;
pub const RECORD_SAMPLE: u32 = 9;
pub const RECORD_MMAP2: u32 = 10;
pub const LAST_KERNEL_RECORD: u32 = 21; // PERF_RECORD_AUX_OUTPUT_HW_ID
pub const HEADER_ATTR: u32 = 64;
pub const HEADER_TRACING_DATA: u32 = 66;
pub const HEADER_BUILD_ID: u32 = 67;
pub const FINISHED_ROUND: u32 = 68;
pub const AUXTRACE: u32 = 71;
pub const HEADER_FEATURE: u32 = 80;
pub const COMPRESSED: u32 = 81;
pub const COMPRESSED2: u32 = 83;
pub const LAST_USER_RECORD: u32 = 84; // PERF_RECORD_BPF_METADATA

// header.misc bits.
pub const MISC_CPUMODE_MASK: u16 = 7;
pub const MISC_USER: u16 = 2;
/// On MMAP: a data (non-executable) mapping.
pub const MISC_MMAP_DATA: u16 = 1 << 13;
/// On COMM: the name changed because of an exec (same bit as [`MISC_MMAP_DATA`]).
pub const MISC_COMM_EXEC: u16 = 1 << 13;
/// On MMAP2: the record carries a build id instead of device and inode.
pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// On HEADER_BUILD_ID entries: the id's length is given.
pub const MISC_BUILD_ID_SIZE: u16 = 1 << 15;
pub const PROT_EXEC: u32 = 4;

// perf_event_attr.type and .config: the sampling events the recorder writes and the LBR
// estimator recognises.
pub const TYPE_HARDWARE: u32 = 0;
pub const TYPE_SOFTWARE: u32 = 1;
pub const TYPE_RAW: u32 = 4;
pub const HW_CPU_CYCLES: u64 = 0;
pub const HW_INSTRUCTIONS: u64 = 1;
pub const HW_REF_CPU_CYCLES: u64 = 9;
pub const SW_CPU_CLOCK: u64 = 0;
pub const SW_TASK_CLOCK: u64 = 1;
/// Intel's `br_inst_retired.near_taken` (event 0xc4, umask 0x20) as a raw config.
pub const RAW_BR_INST_RETIRED_NEAR_TAKEN: u64 = 0x20c4;

// perf_event_attr.sample_type.
pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_ADDR: u64 = 1 << 3;
pub const SAMPLE_READ: u64 = 1 << 4;
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const SAMPLE_ID: u64 = 1 << 6;
pub const SAMPLE_CPU: u64 = 1 << 7;
pub const SAMPLE_PERIOD: u64 = 1 << 8;
pub const SAMPLE_STREAM_ID: u64 = 1 << 9;
pub const SAMPLE_RAW: u64 = 1 << 10;
pub const SAMPLE_BRANCH_STACK: u64 = 1 << 11;
pub const SAMPLE_REGS_USER: u64 = 1 << 12;
pub const SAMPLE_STACK_USER: u64 = 1 << 13;
pub const SAMPLE_WEIGHT: u64 = 1 << 14;
pub const SAMPLE_DATA_SRC: u64 = 1 << 15;
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;
pub const SAMPLE_TRANSACTION: u64 = 1 << 17;
pub const SAMPLE_REGS_INTR: u64 = 1 << 18;
pub const SAMPLE_PHYS_ADDR: u64 = 1 << 19;
pub const SAMPLE_AUX: u64 = 1 << 20;
pub const SAMPLE_CGROUP: u64 = 1 << 21;
pub const SAMPLE_DATA_PAGE_SIZE: u64 = 1 << 22;
pub const SAMPLE_CODE_PAGE_SIZE: u64 = 1 << 23;
pub const SAMPLE_WEIGHT_STRUCT: u64 = 1 << 24;

// perf_event_attr.read_format.
pub const FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
pub const FORMAT_ID: u64 = 1 << 2;
pub const FORMAT_GROUP: u64 = 1 << 3;
pub const FORMAT_LOST: u64 = 1 << 4;

// perf_event_attr.branch_sample_type.
pub const BRANCH_USER: u64 = 1 << 0;
pub const BRANCH_ANY: u64 = 1 << 3;
pub const BRANCH_HW_INDEX: u64 = 1 << 17;
pub const BRANCH_COUNTERS: u64 = 1 << 19;

/// The size of the first published `perf_event_attr`.
pub const ATTR_SIZE_VER0: usize = 64;

/// Callchain entries at or above this are context markers (PERF_CONTEXT_MAX = -4095).
pub const CONTEXT_MAX: u64 = -4095i64 as u64;
pub const CONTEXT_USER: u64 = -512i64 as u64;

// Feature section ids (HEADER_*).
pub const FEAT_BUILD_ID: u32 = 2;
pub const FEAT_HOSTNAME: u32 = 3;
pub const FEAT_OSRELEASE: u32 = 4;
pub const FEAT_VERSION: u32 = 5;
pub const FEAT_ARCH: u32 = 6;
pub const FEAT_NRCPUS: u32 = 7;
pub const FEAT_CMDLINE: u32 = 11;
pub const FEAT_EVENT_DESC: u32 = 12;
