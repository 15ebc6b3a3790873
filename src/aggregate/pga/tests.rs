use super::*;

fn v(a: u64) -> Vaddr {
    Vaddr(a)
}

fn counters(pairs: &[(u64, u64, u64)], branches: &[(u64, u64, u64)]) -> Counters {
    let mut c = Counters::default();
    for &(s, e, n) in pairs {
        c.add_range(v(s), v(e), n);
    }
    for &(s, t, n) in branches {
        c.add_branch(v(s), v(t), n);
    }
    c
}

fn frame(func: &str, line: u32, discr: u32) -> ContextFrame {
    ContextFrame { func: func.into(), loc: LineLocation::new(line, discr) }
}

/// A CS binary with address contexts, a CS binary with frame contexts, an LBR-only one keyed by
/// file name, and an unprofiled executable; `seed` varies the counts.
fn sample_aggregate(seed: u64) -> Aggregate {
    let mut a = Aggregate::new(vec![
        ("ignore-stack-samples".into(), "false".into()),
        ("compress-recursion".into(), "-1".into()),
    ]);
    a.inputs = 1;
    let mut probe = BinaryAggregate {
        file_name: "app".into(),
        inputs: 1,
        matched_by: Some(MatchedBy::BuildId),
        samples: SampleStats {
            read: 10 + seed,
            used: 8 + seed,
            outside_binary: 2,
            ..Default::default()
        },
        distinct_samples: 5,
        ..Default::default()
    };
    probe.normalize.samples = 8 + seed;
    probe.normalize.invalid_return_addrs = BTreeSet::from([v(0x401000 + seed), v(0x402000)]);
    probe.unwind.total_branches = 100;
    probe.unwind.untracked_callsites = BTreeSet::from([Vaddr::EXTERNAL]);
    probe.counters.context_sensitive = true;
    *probe.counters.counters_mut(ContextKey::Addrs(vec![v(0x401010), v(0x401200 + seed)])) =
        counters(
            &[(0x401300, 0x401320, 3 + seed), (0x401000, 0x401008, 1)],
            &[(0x401320, 0x401300, 2)],
        );
    *probe.counters.counters_mut(ContextKey::Addrs(vec![])) =
        counters(&[], &[(Vaddr::EXTERNAL.0, 0x401000, 7)]);
    a.binaries.insert(BinaryKey::BuildId(vec![0xab, 0xcd, seed as u8 & 1]), probe);
    let mut line = BinaryAggregate { file_name: "line".into(), inputs: 1, ..Default::default() };
    line.counters.context_sensitive = true;
    *line.counters.counters_mut(ContextKey::Frames(vec![
        frame("main", 3, 0),
        frame("foo:bar", 1, 2 + seed as u32),
        frame("baz", 0, 0),
    ])) = counters(&[(0x1000, 0x1010, 4)], &[]);
    *line.counters.counters_mut(ContextKey::Frames(vec![frame("main", 0, 0)])) =
        counters(&[(0x900, 0x910, seed)], &[(0x910, 0x1000, 1)]);
    a.binaries.insert(BinaryKey::BuildId(vec![0x11; 20]), line);
    let mut lbr =
        BinaryAggregate { file_name: "nobuildid".into(), inputs: 1, ..Default::default() };
    *lbr.counters.counters_mut(ContextKey::None) =
        counters(&[(0x10, 0x20, 1 << 40)], &[(0x20, 0x10, seed)]);
    a.binaries.insert(BinaryKey::FileName("nobuildid".into()), lbr);
    a.unprofiled.insert((vec![0x99], "/usr/lib/libc.so.6".into()), 1);
    a.unprofiled.insert((vec![], "/opt/other".into()), 1 + seed);
    a
}

#[test]
fn round_trips_every_kind_of_entry() {
    let a = sample_aggregate(3);
    let bytes = a.encode();
    assert_eq!(&bytes[..8], b"\x89PGA\r\n\x1a\n");
    let back = Aggregate::decode(&bytes, Path::new("a.pga")).unwrap();
    assert_eq!(back, a);
    assert_eq!(back.encode(), bytes, "a decoded file re-encodes to the same bytes");
}

#[test]
fn merging_in_any_order_and_grouping_gives_the_same_bytes() {
    let parts: Vec<Aggregate> = (0..4).map(sample_aggregate).collect();
    let merge = |order: &[usize]| {
        let mut m = parts[order[0]].clone();
        for &i in &order[1..] {
            m.merge(parts[i].clone(), "first", Path::new("next")).unwrap();
        }
        m
    };
    let reference = merge(&[0, 1, 2, 3]).encode();
    // Every order of a left fold.
    let mut orders = vec![vec![0, 1, 2, 3]];
    for _ in 0..23 {
        let mut next = orders.last().unwrap().clone();
        // Next permutation in lexicographic order.
        let i = (0..3).rev().find(|&i| next[i] < next[i + 1]).unwrap();
        let j = (i + 1..4).rev().find(|&j| next[j] > next[i]).unwrap();
        next.swap(i, j);
        next[i + 1..].reverse();
        orders.push(next);
    }
    for order in &orders {
        assert_eq!(merge(order).encode(), reference, "order {order:?}");
    }
    // Trees: (0+1)+(2+3) and 0+((1+2)+3).
    let mut left = merge(&[0, 1]);
    left.merge(merge(&[2, 3]), "l", Path::new("r")).unwrap();
    assert_eq!(left.encode(), reference);
    let mut inner = merge(&[1, 2]);
    inner.merge(parts[3].clone(), "i", Path::new("3")).unwrap();
    let mut outer = parts[0].clone();
    outer.merge(inner, "0", Path::new("i")).unwrap();
    assert_eq!(outer.encode(), reference);
    // Sums, not maxima: the probe binary's hot range counted 3+4+5+6 times.
    let m = Aggregate::decode(&reference, Path::new("m")).unwrap();
    assert_eq!(m.inputs, 4);
    assert_eq!(m.unprofiled[&(vec![], "/opt/other".to_string())], 1 + 2 + 3 + 4);
    let line = &m.binaries[&BinaryKey::BuildId(vec![0x11; 20])];
    assert_eq!(line.inputs, 4);
    assert_eq!(
        line.counters.by_context[&ContextKey::Frames(vec![frame("main", 0, 0)])].ranges
            [&(v(0x900), v(0x910))],
        6
    );
}

#[test]
fn call_stacks_win_over_lbr_only_entries_as_in_one_run() {
    let mut cs = BinaryAggregate { file_name: "b".into(), ..Default::default() };
    cs.counters.context_sensitive = true;
    *cs.counters.counters_mut(ContextKey::Addrs(vec![v(1)])) = counters(&[(4, 8, 1)], &[]);
    let mut lbr = BinaryAggregate { file_name: "a".into(), ..Default::default() };
    lbr.samples.read = 5;
    *lbr.counters.counters_mut(ContextKey::None) = counters(&[(4, 8, 9)], &[]);
    let mut x = cs.clone();
    x.merge(lbr.clone());
    let mut y = lbr;
    y.merge(cs.clone());
    assert_eq!(x, y);
    assert_eq!(x.counters, cs.counters);
    assert_eq!((x.samples.read, x.file_name.as_str()), (5, "a"));
}

#[test]
fn different_options_are_not_merged() {
    let a = sample_aggregate(0);
    let mut b = sample_aggregate(0);
    b.options[1].1 = "true".into();
    let mut m = a.clone();
    let e = m.merge(b, "a.pga", Path::new("b.pga")).unwrap_err().to_string();
    assert_eq!(
        e,
        "b.pga: aggregated with --ignore-stack-samples=true, but a.pga with --ignore-stack-samples=false: aggregates made with different options cannot be merged"
    );
}

fn decode_err(bytes: &[u8]) -> String {
    Aggregate::decode(bytes, Path::new("x.pga")).unwrap_err().to_string()
}

/// An aggregate file around `payload` (`_bytes`: the file it replaces, for readability).
fn with_payload(_bytes: &[u8], payload: &[u8]) -> Vec<u8> {
    file_from_payload(payload)
}

#[test]
fn bad_files_give_errors_naming_file_and_offset() {
    let good = sample_aggregate(1).encode();
    assert_eq!(
        decode_err(b"PERFILE2"),
        "x.pga: at byte offset 0: not a profgen aggregate (.pga): bad magic"
    );
    assert_eq!(
        decode_err(&good[..20]),
        "x.pga: at byte offset 20: header cut short: 20 of 40 bytes"
    );
    let mut v1 = good.clone();
    v1[8] = 1;
    assert_eq!(
        decode_err(&v1),
        "x.pga: at byte offset 8: format version 1; this profgen reads version 2"
    );
    let n = good.len() - HEADER_SIZE;
    assert_eq!(
        decode_err(&good[..good.len() - 1]),
        format!(
            "x.pga: at byte offset 16: file cut short: header says {n} payload bytes, file has {}",
            n - 1
        )
    );
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    assert_eq!(
        decode_err(&flipped),
        "x.pga: at byte offset 24: checksum mismatch: the file is corrupt"
    );
    // A consistent header over a payload that lies.
    let payload = &good[HEADER_SIZE..];
    let mut extra = payload.to_vec();
    extra.push(0);
    assert_eq!(
        decode_err(&with_payload(&good, &extra)),
        format!("x.pga: at byte offset {}: 1 bytes after the end of the aggregate", good.len())
    );
    assert_eq!(
        decode_err(&with_payload(&good, &[0xff, 0xff])),
        "x.pga: at byte offset 40: options: the file ends inside a LEB128 value"
    );
    assert_eq!(
        decode_err(&with_payload(&good, &[100, 1])),
        "x.pga: at byte offset 40: options 100 exceeds the 1 bytes left"
    );
    // Options "b" then "a": not canonical.
    let unsorted = [2, 1, b'b', 0, 1, b'a', 0, 0, 0, 0];
    assert_eq!(
        decode_err(&with_payload(&good, &unsorted)),
        "x.pga: at byte offset 44: options out of order (not strictly increasing)"
    );
    // Every truncation of the payload fails cleanly.
    for cut in 0..payload.len() {
        let e = Aggregate::decode(&with_payload(&good, &payload[..cut]), Path::new("x.pga"));
        assert!(e.is_err(), "payload cut at {cut} was accepted");
    }
}

#[test]
fn an_empty_aggregate_is_small() {
    let a = Aggregate::new(vec![]);
    let bytes = a.encode();
    assert_eq!(bytes.len(), HEADER_SIZE + 4);
    assert_eq!(Aggregate::decode(&bytes, Path::new("e")).unwrap(), a);
}
