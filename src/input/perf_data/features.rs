//! Header feature sections (file mode) and their pipe-mode record twins: build ids, command line,
//! event names. A malformed feature is a warning, not an error: samples do not depend on it.

use super::abi::*;

use super::bytes::{Cursor, c_str, u16_at, u32_at};
use crate::input::InputInfo;
const BUILD_ID_MAX: usize = 20;

/// Decodes one feature section into `info`. Returns a description of what was wrong, if anything.
pub(super) fn parse_feature(id: u32, data: &[u8], info: &mut InputInfo) -> Result<(), String> {
    match id {
        FEAT_BUILD_ID => parse_build_ids(data, info),
        FEAT_CMDLINE => parse_cmdline(data, info),
        FEAT_EVENT_DESC => parse_event_desc(data, info),
        _ => Ok(()),
    }
}

/// The build-id feature is a sequence of `build_id_event` records (the same layout as the pipe
/// mode `PERF_RECORD_HEADER_BUILD_ID` record).
fn parse_build_ids(mut data: &[u8], info: &mut InputInfo) -> Result<(), String> {
    while !data.is_empty() {
        let size = u16_at(data, 6).ok_or("build-id entry header cut short")? as usize;
        let entry = data.get(..size).ok_or("build-id entry longer than the section")?;
        if size < 8 {
            return Err(format!("build-id entry size {size} smaller than its header"));
        }
        parse_build_id_event(entry, info)?;
        data = &data[size..];
    }
    Ok(())
}

/// One `build_id_event`: header, pid, 24 bytes of build id (+ size byte), NUL-terminated path.
pub(super) fn parse_build_id_event(rec: &[u8], info: &mut InputInfo) -> Result<(), String> {
    let misc = u16_at(rec, 4).ok_or("build-id record cut short")?;
    let id_field = rec.get(12..36).ok_or("build-id record too short for its build id")?;
    let len = if misc & MISC_BUILD_ID_SIZE != 0 {
        usize::from(id_field[BUILD_ID_MAX]).min(BUILD_ID_MAX)
    } else {
        BUILD_ID_MAX
    };
    let path = c_str(&rec[36..]).into_owned();
    info.build_ids.push((path, id_field[..len].to_vec()));
    Ok(())
}

/// A perf header string: u32 length (including NUL padding), then the bytes.
fn read_string(c: &mut Cursor<'_>) -> Option<String> {
    let len = c.u32()?;
    let bytes = c.bytes(usize::try_from(len).ok()?)?;
    Some(c_str(bytes).into_owned())
}

fn parse_cmdline(data: &[u8], info: &mut InputInfo) -> Result<(), String> {
    let mut c = Cursor::new(data);
    let nr = c.u32().ok_or("cmdline section cut short")?;
    for _ in 0..nr {
        info.cmdline.push(read_string(&mut c).ok_or("cmdline argument cut short")?);
    }
    Ok(())
}

/// EVENT_DESC: u32 nr, u32 attr_size, then per event: attr, u32 nr_ids, name string, ids.
fn parse_event_desc(data: &[u8], info: &mut InputInfo) -> Result<(), String> {
    let mut c = Cursor::new(data);
    let nr = c.u32().ok_or("event_desc section cut short")?;
    let attr_size = c.u32().ok_or("event_desc section cut short")?;
    let mut names = Vec::new();
    for _ in 0..nr {
        c.skip(u64::from(attr_size)).ok_or("event_desc attr cut short")?;
        let nr_ids = c.u32().ok_or("event_desc id count cut short")?;
        names.push(read_string(&mut c).ok_or("event_desc name cut short")?);
        c.skip(u64::from(nr_ids) * 8).ok_or("event_desc ids cut short")?;
    }
    info.event_names = names;
    Ok(())
}

/// Pipe mode `PERF_RECORD_HEADER_FEATURE`: header, u64 feature id, then the section bytes.
pub(super) fn parse_feature_record(rec: &[u8], info: &mut InputInfo) -> Result<(), String> {
    let id = u32_at(rec, 8).ok_or("feature record cut short")?;
    parse_feature(id, rec.get(16..).unwrap_or_default(), info)
}
