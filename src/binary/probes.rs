//! TODO
pub struct ProbeInfo {}
impl ProbeInfo {
    pub fn load(_obj: &super::elf::Elf<'_>, _symbols: &[super::elf::Symbol<'_>]) -> Result<Option<ProbeInfo>, String> {
        Ok(None)
    }
}
