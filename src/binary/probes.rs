//! TODO
pub struct ProbeInfo {}
