//! TODO (binary branch)
pub fn base_discriminator(_d: u32) -> u32 { todo!() }
pub fn duplication_factor(_d: u32) -> u32 { todo!() }
pub fn canonical_fn_name(_n: &str) -> &str { todo!() }
