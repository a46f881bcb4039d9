//! `--data_validation` (perftest 6.29, `src/perftest_parameters.c` and `host_validation.c`):
//! perftest's rules for the flag, with its messages, and the reason rnic then refuses it.
//!
//! perftest's validation is a protocol of its own, not a local check: with it the per-QP
//! address message carries one more field (the tail markers' address, `KEY_PRINT_FMT_DV`),
//! the sender fills each chunk of a ring of receive slots with one of three rotating byte
//! patterns (0x01, 0x02, 0x03) and signals each finished chunk with an RDMA FETCH_AND_ADD on
//! that chunk's tail marker, and validator threads on the target poll the markers and compare
//! every byte. rnic implements none of that layout, so a run with the flag would not pair with
//! perftest; it refuses the flag with a usage error instead of ignoring it.

use super::{Conn, PerfArgs, TestKind, Verb};
use crate::error::ToolError;

/// perftest's conditions for `--data_validation`, in its order and with its messages; then
/// rnic's refusal (the protocol is not implemented).
pub fn check(
    verb: Verb,
    kind: TestKind,
    conn: Conn,
    a: &PerfArgs,
    tx_depth: u32,
) -> Result<(), ToolError> {
    let rule = |bad: bool, m: &str| {
        if bad {
            Err(ToolError::Usage(m.to_string()))
        } else {
            Ok(())
        }
    };
    rule(
        !matches!(verb, Verb::Write | Verb::Read) || a.write_with_imm,
        "--data_validation is only supported with WRITE or READ verb",
    )?;
    rule(
        kind != TestKind::Bw,
        "--data_validation is only supported in bandwidth tests",
    )?;
    rule(
        a.post_list > 1,
        "--data_validation is incompatible with --post_list > 1",
    )?;
    rule(
        conn != Conn::Rc,
        "--data_validation requires RC connection type",
    )?;
    rule(
        a.all,
        "--data_validation is incompatible with -a (run all sizes)",
    )?;
    rule(
        tx_depth < 32,
        "--data_validation requires tx_depth >= 32 (use -t)",
    )?;
    Err(ToolError::Usage(
        "--data_validation: rnic does not implement perftest's validation protocol (tail \
         markers in the QP message, FETCH_AND_ADD chunk markers, rotating fill patterns), so \
         it cannot pair with a validating perftest; run without it"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::error::ToolError;
    use crate::perf::{TestKind, Verb, config_from};

    fn refusal(verb: Verb, kind: TestKind, args: &[&str]) -> String {
        let mut v = vec!["--data_validation"];
        v.extend_from_slice(args);
        match config_from(verb, kind, &v) {
            Err(ToolError::Usage(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn perftest_rules_then_rnic_refuses() {
        use TestKind::{Bw, Lat};
        let cases: [(Verb, TestKind, &[&str], &str); 8] = [
            (
                Verb::Send,
                Bw,
                &[],
                "is only supported with WRITE or READ verb",
            ),
            (
                Verb::Write,
                Bw,
                &["--write_with_imm"],
                "is only supported with WRITE or READ verb",
            ),
            (
                Verb::Atomic,
                Bw,
                &[],
                "is only supported with WRITE or READ verb",
            ),
            (Verb::Read, Lat, &[], "is only supported in bandwidth tests"),
            (
                Verb::Write,
                Bw,
                &["-l", "2"],
                "is incompatible with --post_list > 1",
            ),
            (
                Verb::Write,
                Bw,
                &["-c", "UC"],
                "requires RC connection type",
            ),
            (
                Verb::Write,
                Bw,
                &["-a"],
                "is incompatible with -a (run all sizes)",
            ),
            (
                Verb::Read,
                Bw,
                &["-t", "16"],
                "requires tx_depth >= 32 (use -t)",
            ),
        ];
        for (verb, kind, args, want) in cases {
            let m = refusal(verb, kind, args);
            assert_eq!(m, format!("--data_validation {want}"), "{verb:?} {args:?}");
        }
        // Every perftest rule satisfied: rnic's own refusal.
        for verb in [Verb::Write, Verb::Read] {
            let m = refusal(verb, Bw, &[]);
            assert!(
                m.contains("does not implement perftest's validation protocol"),
                "{m}"
            );
        }
    }
}
