//! Every layout hw-regs declares with an `mlx5_ifc.h` name, checked against the layout table
//! generated from that header (`reference/mlx5_ifc_layouts.tsv` in the shared folder): the
//! structure exists, its size matches, every declared field exists with the same bit offset
//! and width (nested layouts: the same structure type), and no two declared fields overlap.
//!
//! Unions (`hca_cap_union`, the MODIFY_CQ field-select union) are the one exception to the
//! overlap rule: all their members start at bit 0 by definition, so for a structure whose
//! table size row says `union` the overlap check is skipped and only each member's offset,
//! width and type are compared.

use std::collections::HashMap;

use rnic_hw_regs::catalog::IFC_LAYOUTS;
use rnic_hw_regs::layout::FieldKind;

/// One field row of the table.
struct TsvField {
    bit_offset: usize,
    bit_width: usize,
    /// The nested structure's name for `name <type>` rows.
    nested: Option<String>,
}

/// One structure of the table.
#[derive(Default)]
struct TsvStruct {
    size: Option<usize>,
    is_union: bool,
    fields: HashMap<String, TsvField>,
}

fn parse(text: &str) -> HashMap<String, TsvStruct> {
    let mut out: HashMap<String, TsvStruct> = HashMap::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 5, "line {}: {line:?}", n + 1);
        let (s, f, off, width, prm) = (cols[0], cols[1], cols[2], cols[3], cols[4]);
        let entry = out.entry(s.to_owned()).or_default();
        let bits: usize = off
            .parse()
            .unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        if f == "(size)" {
            assert_eq!(bits % 8, 0, "{s}: size is not whole bytes");
            entry.size = Some(bits / 8);
            entry.is_union = prm.starts_with("union");
            continue;
        }
        let (name, nested) = match f.split_once(" <") {
            Some((name, ty)) => (name, Some(ty.trim_end_matches('>').to_owned())),
            None => (f, None),
        };
        let bit_width: usize = width
            .parse()
            .unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        entry.fields.insert(
            name.to_owned(),
            TsvField {
                bit_offset: bits,
                bit_width,
                nested,
            },
        );
    }
    out
}

#[test]
fn declared_layouts_match_mlx5_ifc() {
    let Some(path) = rnic_tests::shared_file("reference/mlx5_ifc_layouts.tsv") else {
        return;
    };
    let text = std::fs::read_to_string(&path).expect("read the layout table");
    let table = parse(&text);

    let mut errors = Vec::new();
    let mut fields_checked = 0usize;
    let mut unions = 0usize;
    for layout in IFC_LAYOUTS {
        let name = layout.ifc_name;
        let Some(ts) = table.get(name) else {
            errors.push(format!("{name}: not in mlx5_ifc.h"));
            continue;
        };
        if ts.size != Some(layout.size) {
            errors.push(format!(
                "{name}: size {:#x}, mlx5_ifc.h says {:?}",
                layout.size,
                ts.size.map(|s| format!("{s:#x}"))
            ));
        }
        if ts.is_union {
            unions += 1;
        }
        for f in layout.fields {
            fields_checked += 1;
            let Some(tf) = ts.fields.get(f.name) else {
                errors.push(format!("{name}.{}: no such field in mlx5_ifc.h", f.name));
                continue;
            };
            if (f.bit_offset, f.bit_width) != (tf.bit_offset, tf.bit_width) {
                errors.push(format!(
                    "{name}.{}: bits {}+{}, mlx5_ifc.h says {}+{}",
                    f.name, f.bit_offset, f.bit_width, tf.bit_offset, tf.bit_width
                ));
            }
            match (&f.kind, &tf.nested) {
                (FieldKind::Nested(ours), Some(theirs)) if ours != theirs => errors.push(format!(
                    "{name}.{}: nested {ours}, mlx5_ifc.h says {theirs}",
                    f.name
                )),
                (FieldKind::Nested(ours), None) => errors.push(format!(
                    "{name}.{}: declared nested {ours}, mlx5_ifc.h has a plain field",
                    f.name
                )),
                (FieldKind::Bits | FieldKind::Bytes, Some(theirs)) => errors.push(format!(
                    "{name}.{}: declared plain, mlx5_ifc.h nests {theirs}",
                    f.name
                )),
                _ => {}
            }
            // A nested layout must itself be in the catalog, so its own fields are checked.
            if let FieldKind::Nested(inner) = f.kind {
                if !IFC_LAYOUTS.iter().any(|l| l.ifc_name == inner) {
                    errors.push(format!(
                        "{name}.{}: nested {inner} is not catalogued",
                        f.name
                    ));
                }
            }
        }
        if !ts.is_union {
            let mut spans: Vec<_> = layout
                .fields
                .iter()
                .map(|f| (f.bit_offset, f.bit_offset + f.bit_width, f.name))
                .collect();
            spans.sort();
            for w in spans.windows(2) {
                if w[1].0 < w[0].1 {
                    errors.push(format!("{name}: {} overlaps {}", w[0].2, w[1].2));
                }
            }
        }
    }
    println!(
        "checked {} structs ({unions} unions) and {fields_checked} fields against {}",
        IFC_LAYOUTS.len(),
        path.display()
    );
    assert!(
        errors.is_empty(),
        "{} mismatches with mlx5_ifc.h:\n{}",
        errors.len(),
        errors.join("\n")
    );
}
