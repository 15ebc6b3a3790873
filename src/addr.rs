//! Address spaces as distinct types, so a process address can never be used where a binary
//! virtual address or a file offset is meant.

use std::fmt;

/// An address in a traced process's address space, as perf records it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct RuntimeAddr(pub u64);

/// A virtual address in the profiled ELF binary's own layout (its `p_vaddr` space).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Vaddr(pub u64);

/// A byte offset inside a file (ELF file offset, mmap page offset).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct FileOffset(pub u64);

/// One taken branch: the address it left from and the one it went to, in one address space
/// (perf's last-branch-record `from`/`to`, LLVM's `LBREntry` `Source`/`Target`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Branch<A> {
    pub source: A,
    pub target: A,
}

impl Vaddr {
    /// llvm-profgen's `ExternalAddr`: stands for any address outside the profiled binary.
    pub const EXTERNAL: Vaddr = Vaddr(1);

    pub fn is_external(self) -> bool {
        self == Self::EXTERNAL
    }
}

impl fmt::LowerHex for Vaddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl fmt::LowerHex for RuntimeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}
