//! Synthetic records for the layouts the perf fixtures do not exercise: every sample_type field,
//! group reads, branch hw_idx and counters, oversized attrs, MMAP2 build ids, file-mode headers.

use std::path::Path;

use super::abi::*;
use super::order::NO_ROUNDS_WINDOW;
use super::*;
use crate::addr::RuntimeAddr;
use crate::input::{MmapEvent, Sample};
use std::sync::atomic::Ordering::Relaxed;

fn words(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn record(rtype: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut r = rtype.to_le_bytes().to_vec();
    r.extend_from_slice(&misc.to_le_bytes());
    r.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
    r.extend_from_slice(body);
    r
}

/// An attr of `size` bytes (any size ≥ 64, like newer perf's bigger attrs).
fn attr(
    size: usize,
    sample_type: u64,
    read_format: u64,
    branch_sample_type: u64,
    regs_user: u64,
) -> Vec<u8> {
    let mut a = vec![0u8; size];
    a[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    a[24..32].copy_from_slice(&sample_type.to_le_bytes());
    a[32..40].copy_from_slice(&read_format.to_le_bytes());
    a[40..48].copy_from_slice(&(1u64 << 18).to_le_bytes()); // sample_id_all
    if size >= 88 {
        a[72..80].copy_from_slice(&branch_sample_type.to_le_bytes());
        a[80..88].copy_from_slice(&regs_user.to_le_bytes());
    }
    a
}

fn pipe(records: &[Vec<u8>]) -> Vec<u8> {
    let mut p = b"PERFILE2".to_vec();
    p.extend_from_slice(&16u64.to_le_bytes());
    for r in records {
        p.extend_from_slice(r);
    }
    p
}

fn describe(s: &Sample<'_>) -> String {
    format!(
        "sample attr={} ip={:#x} pid={:?} tid={:?} time={:?} period={} chain={:x?} lbr={:x?}",
        s.attr_index,
        s.ip.0,
        s.pid,
        s.tid,
        s.time,
        s.period,
        s.callchain.iter().map(|a| a.0).collect::<Vec<_>>(),
        s.branches.iter().map(|b| (b.source.0, b.target.0)).collect::<Vec<_>>()
    )
}

fn run(bytes: &[u8]) -> (Vec<String>, Result<ReadReport, Error>) {
    let mut out = Vec::new();
    let result = read_perf_data(bytes, Path::new("t.data"), |e| {
        out.push(match e {
            PerfEvent::Sample(s) => describe(&s),
            other => format!("{other:?}"),
        })
    });
    (out, result)
}

const ALL_FIELDS: u64 = SAMPLE_IDENTIFIER
    | SAMPLE_IP
    | SAMPLE_TID
    | SAMPLE_TIME
    | SAMPLE_ADDR
    | SAMPLE_ID
    | SAMPLE_STREAM_ID
    | SAMPLE_CPU
    | SAMPLE_PERIOD
    | SAMPLE_READ
    | SAMPLE_CALLCHAIN
    | SAMPLE_RAW
    | SAMPLE_BRANCH_STACK
    | SAMPLE_REGS_USER
    | SAMPLE_STACK_USER
    | SAMPLE_WEIGHT_STRUCT
    | SAMPLE_DATA_SRC
    | SAMPLE_TRANSACTION
    | SAMPLE_REGS_INTR
    | SAMPLE_PHYS_ADDR
    | SAMPLE_CGROUP
    | SAMPLE_DATA_PAGE_SIZE
    | SAMPLE_CODE_PAGE_SIZE
    | SAMPLE_AUX;

/// A body with every field, in perf_event.h order; `id` selects the attr.
fn full_sample(id: u64, ip: u64) -> Vec<u8> {
    let kernel = -128i64 as u64;
    let user = -512i64 as u64;
    let mut b = words(&[id, ip, (7u64 << 32) | 5, 1000, 0xadd, id, 99, 1, 4242]);
    // READ, group with TOTAL_TIME_ENABLED | ID | LOST: nr, enabled, 2 × (value, id, lost).
    b.extend(words(&[2, 77, 10, id, 0, 11, id, 0]));
    // CALLCHAIN with kernel part first.
    b.extend(words(&[5, kernel, 0xffffffff81000010, user, ip, 0x401234]));
    // RAW: u32 size, data (4 + 12 = 16 bytes keeps 8-byte alignment).
    b.extend(12u32.to_le_bytes());
    b.extend([0xee; 12]);
    // BRANCH_STACK with hw_idx and counters: nr, hw_idx, 2 × (from, to, flags), 2 counters.
    b.extend(words(&[2, 31, 0x4010, 0x4020, 0, 0x4030, 0x4040, 0, 3, 4]));
    // REGS_USER: abi, 3 registers (mask has 3 bits).
    b.extend(words(&[2, 1, 2, 3]));
    // STACK_USER: size, data, dyn_size.
    b.extend(words(&[16, 0xaa, 0xbb, 8]));
    // WEIGHT_STRUCT, DATA_SRC, TRANSACTION.
    b.extend(words(&[5, 6, 7]));
    // REGS_INTR with abi 0: no registers follow.
    b.extend(words(&[0]));
    // PHYS_ADDR, CGROUP, DATA_PAGE_SIZE, CODE_PAGE_SIZE, AUX (size 8 + data).
    b.extend(words(&[8, 9, 4096, 4096, 8, 0xcc]));
    b
}

fn full_attr(size: usize) -> Vec<u8> {
    let read = FORMAT_TOTAL_TIME_ENABLED | FORMAT_ID | FORMAT_LOST | FORMAT_GROUP;
    attr(size, ALL_FIELDS, read, BRANCH_HW_INDEX | BRANCH_COUNTERS, 0b1011)
}

fn attr_record(attr: Vec<u8>, ids: &[u64]) -> Vec<u8> {
    let mut body = attr;
    body.extend(words(ids));
    record(64, 0, &body)
}

#[test]
fn every_sample_field_is_decoded_or_skipped_in_order() {
    let bytes = pipe(&[
        attr_record(full_attr(136), &[100]),
        attr_record(full_attr(256), &[200, 201]), // bigger than any attr we know
        record(9, 2, &full_sample(201, 0x401000)),
        record(9, 1, &full_sample(100, 0xffffffff81000010)),
    ]);
    let (out, report) = run(&bytes);
    let report = report.unwrap();
    assert_eq!(
        out,
        [
            "sample attr=1 ip=0x401000 pid=Some(5) tid=Some(7) time=Some(1000) period=4242 chain=[401000, 401234] lbr=[(4010, 4020), (4030, 4040)]",
            "sample attr=0 ip=0xffffffff81000010 pid=Some(5) tid=Some(7) time=Some(1000) period=4242 chain=[ffffffff81000010, 401234] lbr=[(4010, 4020), (4030, 4040)]",
        ]
    );
    assert_eq!(
        (report.samples, report.samples_with_unknown_tail, report.samples_without_attr),
        (2, 0, 0)
    );
}

#[test]
fn short_sample_body_names_the_missing_field() {
    let mut body = full_sample(100, 0x401000);
    body.truncate(8 * 9 + 8 * 8 + 8 * 3); // cut inside the callchain's frames
    let bytes = pipe(&[attr_record(full_attr(136), &[100]), record(9, 2, &body)]);
    let err = run(&bytes).1.unwrap_err();
    assert_eq!(
        err.to_string(),
        // pipe header 16 + attr record 152 + sample header 8 + 9 fields, read group, nr: 18 words.
        format!(
            "t.data: at byte offset 320: SAMPLE record ends inside its callchain (sample_type {ALL_FIELDS:#x})"
        )
    );
}

/// A layout read at fixed offsets (no field of variable size but the stacks) names the missing
/// field of a short record as the walk does.
#[test]
fn short_fixed_layout_sample_names_the_missing_field() {
    let st = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_PERIOD | SAMPLE_BRANCH_STACK;
    let branches = [2, 0x4010, 0x4020, 0, 0x4030, 0x4040, 0];
    let body = |words_kept: usize| {
        let mut w = vec![0x401000, (7u64 << 32) | 5, 1000, 4242];
        w.extend(branches);
        words(&w[..words_kept])
    };
    let run_body =
        |b: Vec<u8>| run(&pipe(&[attr_record(attr(64, st, 0, 0, 0), &[]), record(9, 2, &b)]));
    let (out, report) = run_body(body(11));
    report.unwrap();
    assert_eq!(
        out,
        [
            "sample attr=0 ip=0x401000 pid=Some(5) tid=Some(7) time=Some(1000) period=4242 chain=[] lbr=[(4010, 4020), (4030, 4040)]"
        ]
    );
    let errors: Vec<String> =
        [3, 5, 10].map(|kept| run_body(body(kept)).1.unwrap_err().to_string()).into();
    // pipe header 16 + attr record 72 + sample header 8: the body starts at 96.
    assert_eq!(
        errors,
        [
            format!(
                "t.data: at byte offset 120: SAMPLE record ends inside its period (sample_type {st:#x})"
            ),
            format!(
                "t.data: at byte offset 136: SAMPLE record ends inside its branch stack (sample_type {st:#x})"
            ),
            format!(
                "t.data: at byte offset 136: SAMPLE record ends inside its branch stack (sample_type {st:#x})"
            ),
        ]
    );
}

#[test]
fn kernel_only_callchain_without_markers_follows_cpumode() {
    let st = SAMPLE_IP | SAMPLE_CALLCHAIN;
    let bytes = pipe(&[
        attr_record(attr(64, st, 0, 0, 0), &[]),
        record(9, 1, &words(&[0xffffffff81000000, 2, 0xffffffff81000000, 0xffffffff81000100])),
        record(9, 2, &words(&[0x1000, 2, 0x1000, 0x2000])),
    ]);
    let (out, report) = run(&bytes);
    report.unwrap();
    assert_eq!(
        out,
        [
            "sample attr=0 ip=0xffffffff81000000 pid=None tid=None time=None period=1 chain=[] lbr=[]",
            "sample attr=0 ip=0x1000 pid=None tid=None time=None period=1 chain=[1000, 2000] lbr=[]",
        ]
    );
}

#[test]
fn unknown_ids_and_record_types_are_counted_and_skipped() {
    let st = SAMPLE_IDENTIFIER | SAMPLE_IP;
    let bytes = pipe(&[
        attr_record(attr(64, st, 0, 0, 0), &[1]),
        attr_record(attr(64, st, 0, 0, 0), &[2]),
        record(9, 2, &words(&[3, 0x1000])),
        record(9, 2, &words(&[2, 0x2000])),
        record(200, 0, &words(&[1, 2])),
    ]);
    let (out, report) = run(&bytes);
    let report = report.unwrap();
    assert_eq!(
        out,
        ["sample attr=1 ip=0x2000 pid=None tid=None time=None period=1 chain=[] lbr=[]"]
    );
    assert_eq!((report.samples_without_attr, report.unknown_records, report.records), (1, 1, 5));
}

fn mmap2_body(build_id: Option<&[u8]>, prot: u32, name: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(10i32.to_le_bytes());
    b.extend(11i32.to_le_bytes());
    b.extend(words(&[0x7000, 0x3000, 0x1000]));
    let mut id_area = [0u8; 24];
    if let Some(id) = build_id {
        id_area[0] = id.len() as u8;
        id_area[4..4 + id.len()].copy_from_slice(id);
    }
    b.extend(id_area);
    b.extend(prot.to_le_bytes());
    b.extend(2u32.to_le_bytes());
    b.extend(name.as_bytes());
    b.resize((b.len() + 1).next_multiple_of(8), 0);
    b.extend(words(&[10 | (11 << 32), 555])); // sample_id_all trailer: tid, time
    b
}

#[test]
fn mmap_variants() {
    let mut mmap1 = Vec::new();
    mmap1.extend((-1i32).to_le_bytes());
    mmap1.extend(0i32.to_le_bytes());
    mmap1.extend(words(&[0xffff0000, 0x100, 0]));
    mmap1.extend(b"/data/file\0\0\0\0\0\0");
    let bytes = pipe(&[
        attr_record(attr(64, SAMPLE_TID | SAMPLE_TIME, 0, 0, 0), &[]),
        record(10, 1 << 14, &mmap2_body(Some(&[0xab; 8]), 5, "/bin/app")),
        record(10, 0, &mmap2_body(None, 1, "/lib/data.so")),
        record(1, 1 << 13, &mmap1),
    ]);
    let (_, report) = run(&bytes);
    report.unwrap();
    let mut mmaps = Vec::new();
    read_perf_data(&bytes, Path::new("t"), |e| {
        if let PerfEvent::Mmap(m) = e {
            mmaps.push(m.into_owned())
        }
    })
    .unwrap();
    let app = MmapEvent {
        pid: Some(10),
        tid: Some(11),
        start: RuntimeAddr(0x7000),
        len: 0x3000,
        pgoff: crate::addr::FileOffset(0x1000),
        executable: true,
        path: "/bin/app".into(),
        build_id: Some(vec![0xab; 8]),
        record: None,
    };
    let data =
        MmapEvent { executable: false, path: "/lib/data.so".into(), build_id: None, ..app.clone() };
    let file = MmapEvent {
        pid: Some(-1),
        tid: Some(0),
        start: RuntimeAddr(0xffff0000),
        len: 0x100,
        pgoff: crate::addr::FileOffset(0),
        executable: false,
        path: "/data/file".into(),
        build_id: None,
        record: None,
    };
    assert_eq!(mmaps, [app, data, file]);
}

/// A deferred decode gives mmap events the position of their record, where another thread reads
/// the event's pid, start, length and file offset again.
#[test]
fn deferred_mmaps_read_again_from_their_records() {
    let mut data = record(10, 1 << 14, &mmap2_body(Some(&[0xab; 8]), 5, "/bin/app"));
    data.extend(record(10, 0, &mmap2_body(None, 1, "/lib/data.so")));
    data.extend(record(10, 0, &mmap2_body(None, 5, "/bin/app")));
    let bytes = file_mode(attr(64, SAMPLE_TID | SAMPLE_TIME, 0, 0, 0), &data);
    let data = PerfData::parse(&bytes, Path::new("t.data")).unwrap();
    let bodies = data.sample_bodies().unwrap();
    let mut mmaps = Vec::new();
    data.decode_in_time_order_deferred(
        &mut |e| {
            if let PerfEvent::Mmap(m) = e {
                let again = bodies.mmap_span(m.record.expect("its record's position"));
                assert_eq!(again, Some((m.pid.expect("a record's pid"), m.start, m.len, m.pgoff)));
                mmaps.push(m.into_owned());
            }
        },
        |_, _| {},
        None,
        None,
    )
    .unwrap();
    let paths: Vec<_> = mmaps.iter().map(|m| m.path.to_string()).collect();
    assert_eq!(paths, ["/bin/app", "/lib/data.so", "/bin/app"]);
    assert_eq!(mmaps[0].build_id.as_deref(), Some(&[0xab; 8][..]));
    let at = mmaps[0].record.unwrap();
    assert_eq!(bodies.mmap_span(at + 16), None, "not a record");
    // The decode that does not defer gives no positions.
    data.decode_in_time_order(|e| {
        if let PerfEvent::Mmap(m) = e {
            assert_eq!(m.record, None);
        }
    })
    .unwrap();
}

/// A minimal file-mode perf.data: header, one attr with ids, data, build-id + cmdline features.
fn file_mode(attr_bytes: Vec<u8>, data: &[u8]) -> Vec<u8> {
    let entry = attr_bytes.len() + 16;
    let ids_at = 104u64;
    let attrs_at = ids_at + 8;
    let data_at = attrs_at + entry as u64;
    let mut f = b"PERFILE2".to_vec();
    f.extend(words(&[104, entry as u64, attrs_at, entry as u64, data_at, data.len() as u64, 0, 0]));
    f.extend(words(&[(1 << 2) | (1 << 11), 0, 0, 0])); // features: BUILD_ID, CMDLINE
    f.extend(words(&[42])); // the attr's one id
    f.extend(&attr_bytes);
    f.extend(words(&[ids_at, 8]));
    f.extend(data);
    let features_at = f.len() as u64;
    let mut build_id = Vec::new();
    build_id.extend((-1i32).to_le_bytes());
    build_id.extend([0x12; 20]);
    build_id.extend([4, 0, 0, 0]); // size 4, flagged by MISC_BUILD_ID_SIZE below
    build_id.extend(b"/bin/app\0\0\0\0\0\0\0\0");
    let build_id = record(67, 1 << 15, &build_id);
    let mut cmdline = 2u32.to_le_bytes().to_vec();
    for arg in ["perf\0\0\0\0", "record\0\0"] {
        cmdline.extend(8u32.to_le_bytes());
        cmdline.extend(arg.as_bytes());
    }
    let sections_at = features_at + 32;
    f.extend(words(&[
        sections_at,
        build_id.len() as u64,
        sections_at + build_id.len() as u64,
        cmdline.len() as u64,
    ]));
    f.extend(build_id);
    f.extend(cmdline);
    f
}

#[test]
fn file_mode_with_oversized_attr_and_features() {
    let st = SAMPLE_IP | SAMPLE_BRANCH_STACK;
    let data = record(9, 2, &words(&[0x500, 1, 0x510, 0x520, 0]));
    let bytes = file_mode(attr(200, st, 0, 0, 0), &data);
    let (out, report) = run(&bytes);
    let report = report.unwrap();
    assert_eq!(
        out,
        ["sample attr=0 ip=0x500 pid=None tid=None time=None period=1 chain=[] lbr=[(510, 520)]"]
    );
    assert_eq!(report.info.build_ids, [("/bin/app".to_string(), vec![0x12; 4])]);
    assert_eq!(report.info.cmdline, ["perf", "record"]);
    assert!(report.warnings.is_empty() && report.truncated.is_none(), "{report:?}");

    // A feature table pointing outside the file is a warning, the samples still decode.
    let mut broken = bytes.clone();
    let table = 104 + 8 + (200 + 16) + data.len(); // header, ids, attr entry, data
    broken[table..table + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let (out, report) = run(&broken);
    let report = report.unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains("feature 2: section lies outside the file"),
        "{:?}",
        report.warnings
    );
}

#[test]
fn oversized_lengths_are_rejected_without_allocating() {
    let st = SAMPLE_IP | SAMPLE_CALLCHAIN;
    let bytes = pipe(&[
        attr_record(attr(64, st, 0, 0, 0), &[]),
        record(9, 2, &words(&[0x1, u64::MAX / 4])),
    ]);
    let err = run(&bytes).1.unwrap_err();
    assert!(err.to_string().contains("ends inside its callchain"), "{err}");
}

/// perf's ordered delivery: a round's records are held until the next round ends, then released
/// up to the newest time of the round before, in time order.
#[test]
fn events_are_delivered_in_time_order_across_rounds() {
    let st = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME;
    let sample = |time: u64, ip: u64| record(9, 2, &words(&[ip, 1 | (1 << 32), time]));
    let mut comm = 1i32.to_le_bytes().to_vec();
    comm.extend(1i32.to_le_bytes());
    comm.extend(b"app\0\0\0\0\0");
    comm.extend(words(&[1 | (1 << 32), 10])); // trailer: tid, time 10
    let round = record(68, 0, &[]);
    let bytes = pipe(&[
        attr_record(attr(64, st, 0, 0, 0), &[]),
        sample(20, 0x20),
        record(3, 0, &comm),
        round.clone(),
        sample(15, 0x15),
        sample(40, 0x40),
        round.clone(),
        sample(30, 0x30),
        round,
        sample(35, 0x35),
    ]);
    let mut order = Vec::new();
    let mut push = |e: PerfEvent<'_>| {
        order.push(match e {
            PerfEvent::Sample(s) => format!("{:x}", s.ip.0),
            _ => "comm".into(),
        })
    };
    read_perf_data(&bytes, Path::new("t"), &mut push).unwrap();
    read_perf_data_stream(&bytes[..], Path::new("t"), &mut push).unwrap();
    let data = PerfData::parse(&bytes, Path::new("t")).unwrap();
    data.decode(data.data_range(), &mut push).unwrap();
    // Rounds end after 20 (releases nothing: no earlier round), after 40 (releases up to 20) and
    // after 30 (up to 40). 35 comes after 40 was released, so it is late, as in perf.
    let by_time = ["comm", "15", "20", "30", "40", "35"];
    let by_file = ["20", "comm", "15", "40", "30", "35"];
    assert_eq!(order, [&by_time[..], &by_time[..], &by_file[..]].concat());
}

/// A deferred decode hands samples out by position, their entries undecoded; decoding them there
/// gives the whole samples, in the same order among the other events (file mode, rounds, every
/// sample field). Pipe mode, whose attrs are records, is not deferred.
#[test]
fn deferred_samples_decode_in_place_to_the_whole_samples() {
    let round = record(68, 0, &[]);
    let mut data = Vec::new();
    for (i, ip) in [0x401000u64, 0x402000, 0x403000].into_iter().enumerate() {
        let mut body = full_sample(42, ip);
        body[24..32].copy_from_slice(&(1000 - i as u64).to_le_bytes()); // time, newest first
        data.extend(record(9, 2, &body));
        data.extend(&round);
    }
    let file = file_mode(full_attr(136), &data);
    let piped = pipe(&[attr_record(full_attr(136), &[42]), record(9, 2, &full_sample(42, 0x1))]);
    for (bytes, deferred) in [(file, true), (piped, false)] {
        let path = Path::new("t.data");
        let data = PerfData::parse(&bytes, path).unwrap();
        let mut whole = Vec::new();
        data.decode_in_time_order(|e| {
            if let PerfEvent::Sample(s) = e {
                whole.push(describe(&s))
            }
        })
        .unwrap();
        assert_eq!(whole.len(), if deferred { 3 } else { 1 });
        assert_eq!(data.sample_bodies().is_some(), deferred);
        let mut bodies = data.sample_bodies();
        let mut in_place = Vec::new();
        let report = data
            .decode_in_time_order_deferred(
                &mut |e| match (e, bodies.as_mut()) {
                    (PerfEvent::Sample(s), Some(bodies)) => {
                        assert!(s.callchain.is_empty() && s.branches.is_empty());
                        let d = s.record.expect("a sample with its stacks in place");
                        let (callchain, branches) = bodies.stacks(&d);
                        let s = Sample { callchain, branches, record: None, ..s };
                        in_place.push(describe(&s));
                    }
                    (PerfEvent::Sample(s), None) => {
                        assert_eq!(s.record, None);
                        in_place.push(describe(&s));
                    }
                    _ => {}
                },
                |_, _| {},
                None,
                None,
            )
            .unwrap();
        assert_eq!(in_place, whole);
        assert_eq!(report.samples, whole.len() as u64);
    }
}

/// Once its flag is set, a decode (deferred, as at two threads, or not, as at one) hands out by
/// place alone the samples whose fields fill their record and name the thread; reading them
/// there gives the whole samples, in the same order among the other events (consecutive ones as
/// one run), with the same counts. A sample with a word after its fields still comes decoded
/// (and counted as such), as do those before the flag and those without a TID field.
#[test]
fn placed_samples_read_from_their_place_to_the_whole_samples() {
    let user = -512i64 as u64;
    let events = |with_tid: bool, deferred: bool| {
        let tid = if with_tid { SAMPLE_TID } else { 0 };
        let st = SAMPLE_IP | tid | SAMPLE_TIME | SAMPLE_PERIOD | SAMPLE_CALLCHAIN;
        let st = st | SAMPLE_BRANCH_STACK;
        let sample = |ip: u64, time: u64, tail: bool| {
            let mut body = words(&[ip]);
            if with_tid {
                body.extend(words(&[(7u64 << 32) | 5]));
            }
            body.extend(words(&[time, 100 + time, 3, user, ip, 0x401234]));
            body.extend(words(&[2, 0x4010, 0x4020, 0, 0x4030, 0x4040, 0]));
            if tail {
                body.extend(words(&[9]));
            }
            record(9, 2, &body)
        };
        let round = record(68, 0, &[]);
        // Its sample_id (sample_id_all) gives its time.
        let mut mmap = mmap2_body(None, 5, "/bin/app");
        mmap.extend(words(if with_tid { &[(7u64 << 32) | 5, 2] } else { &[2] }));
        // The last four samples in one round: placed ones come in runs, cut by the one with a
        // tail word.
        let mut data = Vec::new();
        for (r, round_after) in [
            (sample(0x401000, 1, false), true),
            (record(10, 0, &mmap), true),
            (sample(0x402000, 3, false), false),
            (sample(0x403000, 4, true), false),
            (sample(0x404000, 5, false), false),
            (sample(0x405000, 6, false), true),
        ] {
            data.extend(r);
            if round_after {
                data.extend(&round);
            }
        }
        let bytes = file_mode(attr(64, st, 0, 0, 0), &data);
        let data = PerfData::parse(&bytes, Path::new("t.data")).unwrap();
        let mut whole = Vec::new();
        let report = data
            .decode_in_time_order(|e| match e {
                PerfEvent::Sample(s) => whole.push(describe(&s)),
                PerfEvent::Mmap(_) => whole.push("mmap".to_string()),
                _ => {}
            })
            .unwrap();
        let mut bodies = data.sample_bodies().unwrap();
        let placing = Arc::new(AtomicBool::new(false));
        let (mut kinds, mut in_place) = (Vec::new(), Vec::new());
        let mut on_event = |e: PerfEvent<'_>| match e {
            PerfEvent::Placed(run) => {
                bodies.read_placed(run, |p| *p, |s| in_place.push(describe(s)));
                kinds.push(if run.len() == 1 { "placed" } else { "placed run" });
            }
            PerfEvent::Sample(s) => {
                let s = match s.record {
                    Some(d) => {
                        assert!(deferred);
                        let (callchain, branches) = bodies.stacks(&d);
                        Sample { callchain, branches, record: None, ..s }
                    }
                    None => s,
                };
                in_place.push(describe(&s));
                kinds.push("sample");
                placing.store(true, Relaxed);
            }
            PerfEvent::Mmap(_) => {
                in_place.push("mmap".to_string());
                kinds.push("mmap");
            }
            _ => {}
        };
        let flag = Some(placing.clone());
        let placed = if deferred {
            data.decode_in_time_order_deferred(&mut on_event, |_, _| {}, flag, None)
        } else {
            data.decode_in_time_order_releasing(&mut on_event, |_, _| {}, flag)
        };
        let placed = placed.unwrap();
        assert_eq!(in_place, whole);
        let counts = |r: &ReadReport| (r.records, r.samples, r.samples_with_unknown_tail);
        assert_eq!(counts(&placed), counts(&report));
        assert_eq!(counts(&report), (9, 5, 1));
        kinds
    };
    for deferred in [true, false] {
        let kinds = ["sample", "mmap", "placed", "sample", "placed run"];
        assert_eq!(events(true, deferred), kinds);
        let kinds = ["sample", "mmap", "sample", "sample", "sample", "sample"];
        assert_eq!(events(false, deferred), kinds);
    }
}

/// A round-less file of `times.len()` samples of ~64 KiB each (SAMPLE_RAW padding), in file order.
fn roundless_file(times: &[u64]) -> Vec<u8> {
    let st = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_RAW;
    let mut data = Vec::new();
    for (i, &t) in times.iter().enumerate() {
        let mut body = words(&[0x1000 + i as u64, 1 | (1 << 32), t]);
        body.extend(65_000u32.to_le_bytes());
        body.resize(body.len() + 65_000, 0);
        data.extend(record(9, 2, &body));
    }
    file_mode(attr(64, st, 0, 0, 0), &data)
}

fn ips_and_release(bytes: &[u8]) -> (Vec<u64>, usize, ReadReport) {
    let data = PerfData::parse(bytes, Path::new("t.data")).unwrap();
    let (mut ips, mut released) = (Vec::new(), 0);
    let report = data
        .decode_in_time_order_releasing(
            &mut |e| {
                if let PerfEvent::Sample(s) = e {
                    ips.push(s.ip.0 - 0x1000);
                }
            },
            |upto, _| released = released.max(upto),
            None,
        )
        .unwrap();
    (ips, released, report)
}

/// Without rounds the queue is a bounded window: a file in time order streams (the input behind
/// the window is released) and comes out in order, with no warning.
#[test]
fn roundless_input_in_time_order_streams_through_a_bounded_window() {
    let n = 1200; // ~78 MB
    let bytes = roundless_file(&(0..n).map(|i| 100 + i).collect::<Vec<_>>());
    let (ips, released, report) = ips_and_release(&bytes);
    assert_eq!(ips, (0..n).collect::<Vec<_>>());
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    // Released up to at most the window (plus one progress step) behind the end.
    let behind = bytes.len() - released;
    assert!(behind <= NO_ROUNDS_WINDOW + CONSUMED_STEP + (1 << 20), "{behind} bytes held");
}

/// Disorder within the window is sorted out; a record older than the released half is delivered
/// late, and the reader says so.
#[test]
fn roundless_input_sorts_within_the_window_and_warns_of_late_records() {
    let n = 1200u64;
    let mut times: Vec<u64> = (0..n).map(|i| 100 + i).collect();
    times.swap(10, 20); // within the window
    times[1100] = 50; // older than everything released by then
    let (ips, _, report) = ips_and_release(&roundless_file(&times));
    // Every other record in time order, the swapped pair included.
    let mut in_time: Vec<u64> = (0..n).filter(|&i| i != 1100).collect();
    in_time.sort_by_key(|&i| times[i as usize]);
    let late_at = ips.iter().position(|&i| i == 1100).unwrap();
    assert_eq!([&ips[..late_at], &ips[late_at + 1..]].concat(), in_time);
    // It comes first in the release after it arrived, before the window's newer half still queued.
    let window_records = NO_ROUNDS_WINDOW / 65_036;
    assert!((1100 - window_records..1100).contains(&late_at), "{late_at}");
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(
        report.warnings[0].contains("no finished rounds, and 1 records came after newer ones beyond the 32 MiB reorder window"),
        "{:?}",
        report.warnings
    );
}

/// Pages still held by batches in flight stay; the whole pages between them and before `upto`
/// are released, and the released prefix ends at the first held page.
#[test]
fn free_pages_are_the_whole_pages_between_held_ranges() {
    const P: usize = 4096;
    let mut held = [5 * P + 10..7 * P + 1, P + 100..2 * P + 100, 20 * P..30 * P];
    let (free, released) = free_pages(0, 10 * P + 5, &mut held);
    assert_eq!(free, [0..P, 3 * P..5 * P, 8 * P..10 * P]);
    assert_eq!(released, P);
    // Nothing held: everything before `upto`, whole pages only.
    let (free, released) = free_pages(2 * P, 4 * P - 1, &mut []);
    assert_eq!((free.len(), free[0].clone(), released), (1, 2 * P..3 * P, 3 * P));
    // A range held from before the released prefix keeps it where it is.
    let mut held = [P..3 * P + 1, 9 * P..9 * P + 1];
    let (free, released) = free_pages(2 * P, 6 * P, &mut held);
    assert_eq!((free.len(), free[0].clone(), released), (1, 4 * P..6 * P, 2 * P));
}

/// A string field ends at its first NUL (or the field's end); bytes that are not UTF-8 become
/// replacement characters instead of failing the read.
#[test]
fn string_fields_end_at_nul_and_read_odd_bytes_lossily() {
    use super::bytes::c_str;
    assert_eq!(c_str(b"lua\0\0\0\0\0"), "lua");
    assert_eq!(c_str(b"no nul"), "no nul");
    assert_eq!(c_str(b"\0after"), "");
    assert_eq!(c_str(b"a\xffb\0c"), "a\u{fffd}b");
}

/// A round-less file of samples with call chains of 1 to 47 frames (records of 56 to 424 bytes),
/// `n` of them, their times in file order but for every 97th, which comes `late_by` older.
fn roundless_chains_file(n: u64, late_by: u64) -> Vec<u8> {
    let st = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CALLCHAIN;
    let mut data = Vec::new();
    for i in 0..n {
        let time = 1_000_000 + 10 * i - if i % 97 == 0 { late_by.min(10 * i) } else { 0 };
        let frames = 1 + (i * 7919) % 47;
        let mut body = words(&[0x1000 + i, 1 | (1 << 32), time, frames]);
        body.extend(words(&(0..frames).map(|f| 0x2000 + f).collect::<Vec<_>>()));
        data.extend(record(9, 2, &body));
    }
    file_mode(attr(64, st, 0, 0, 0), &data)
}

/// What a deferred decode delivers (each sample read from its place, and whether it came placed)
/// and its counts and warnings, with records walked ahead by another decoder, or not: first each
/// of `walks` (`read`, `until`) as far as it goes, then (`beside`: chunks, lead) that many chunks
/// at each of the decode's progress reports up to `lead` past it, as an idle worker would.
fn deferred_events(
    bytes: &[u8],
    walks: &[(usize, usize)],
    beside: Option<(usize, usize)>,
) -> (Vec<String>, (u64, u64), Vec<String>) {
    let data = PerfData::parse(bytes, Path::new("t.data")).unwrap();
    let mut bodies = data.sample_bodies().unwrap();
    let walked = !walks.is_empty() || beside.is_some();
    let ahead = bodies.walk_ahead().cloned().filter(|_| walked);
    if let Some(ahead) = &ahead {
        for &(read, until) in walks {
            while ahead.walk(read, until) {}
        }
    }
    let walk_beside = |_, read: usize| {
        if let (Some(ahead), Some((chunks, lead))) = (&ahead, beside) {
            for _ in 0..chunks {
                ahead.walk(read, read + lead);
            }
        }
    };
    let placing = Arc::new(AtomicBool::new(false));
    let mut events = Vec::new();
    let report = data
        .decode_in_time_order_deferred(
            &mut |e| match e {
                PerfEvent::Placed(run) => {
                    for p in run {
                        let s = bodies.sample(p.record, p.attr.into(), p.len.into()).unwrap();
                        events.push(format!("placed {}", describe(&s)));
                    }
                }
                PerfEvent::Sample(s) => {
                    let (callchain, branches) = bodies.stacks(&s.record.unwrap());
                    events.push(describe(&Sample { callchain, branches, record: None, ..s }));
                    placing.store(true, Relaxed);
                }
                _ => {}
            },
            walk_beside,
            Some(placing.clone()),
            ahead.as_deref(),
        )
        .unwrap();
    if let Some(ahead) = ahead.as_ref().filter(|_| beside.is_none()) {
        assert_eq!(ahead.chunks_left(), 0, "every walked record taken");
    }
    (events, (report.records, report.samples), report.warnings)
}

/// Records walked ahead of the reading thread are queued as it would have queued them: the same
/// events in the same order (placed alike), the same records counted late, in order or not.
#[test]
fn records_walked_ahead_are_queued_as_the_reading_thread_would() {
    for late_by in [0, 2_000_000] {
        let bytes = roundless_chains_file(200_000, late_by);
        let walked = deferred_events(&bytes, &[(0, usize::MAX)], None);
        assert_eq!(walked, deferred_events(&bytes, &[], None));
        let (events, counts, warnings) = walked;
        assert_eq!(counts, (200_000, 200_000));
        assert_eq!(warnings.len(), usize::from(late_by > 0), "{warnings:?}");
        assert!(events[0].starts_with("sample") && events[1].starts_with("placed"));
    }
}

/// A walk that starts again further ahead (the reading thread about to pass it, or past it),
/// beside a reading thread that takes some of its records and passes others, has its records
/// queued as the reading thread would have queued them.
#[test]
fn records_walked_ahead_in_stretches_are_queued_as_the_reading_thread_would() {
    let bytes = roundless_chains_file(200_000, 2_000_000);
    let alone = deferred_events(&bytes, &[], None);
    let mib = 1 << 20;
    // The first window's half to 20 MiB; then from past a reading thread at 24 MiB to 30 MiB.
    let walks = [(0, 20 * mib), (24 * mib, 30 * mib)];
    assert_eq!(deferred_events(&bytes, &walks, None), alone);
    // Slower than the reading thread, or as fast, within 3 or 8 MiB of it.
    for beside in [(1, 3 * mib), (4, 8 * mib)] {
        assert_eq!(deferred_events(&bytes, &walks[..1], Some(beside)), alone);
    }
}
