//! `--plot FILE.svg`: a small hand-written SVG line chart of a `-a` sweep (value against message
//! size, the size axis in powers of two).

use std::fmt::Write as _;

/// Renders the points `(size, value)` as an SVG document.
pub fn svg(title: &str, y_label: &str, points: &[(u64, f64)]) -> String {
    const W: f64 = 720.0;
    const H: f64 = 420.0;
    const L: f64 = 80.0; // left margin
    const R: f64 = 20.0;
    const T: f64 = 40.0;
    const B: f64 = 60.0;
    let pw = W - L - R;
    let ph = H - T - B;
    let pts: Vec<(f64, f64)> = points
        .iter()
        .filter(|(s, v)| *s > 0 && v.is_finite())
        .map(|&(s, v)| ((s as f64).log2(), v))
        .collect();
    let (xmin, xmax) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let (xmin, xmax) = if pts.is_empty() {
        (0.0, 1.0)
    } else if xmax > xmin {
        (xmin, xmax)
    } else {
        (xmin - 1.0, xmax + 1.0)
    };
    let ymax_raw = pts.iter().map(|p| p.1).fold(0.0f64, f64::max);
    let ymax = nice_ceil(if ymax_raw > 0.0 { ymax_raw } else { 1.0 });
    let x = |v: f64| L + (v - xmin) / (xmax - xmin) * pw;
    let y = |v: f64| T + ph - v / ymax * ph;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="16">{}</text>"#,
        W / 2.0,
        esc(title)
    );
    // Axes.
    let _ = writeln!(
        s,
        r#"<path d="M{L},{T} V{} H{}" fill="none" stroke="black"/>"#,
        T + ph,
        L + pw
    );
    // Y grid and labels.
    for i in 0..=5 {
        let v = ymax * f64::from(i) / 5.0;
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{L}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            L + pw,
            L - 6.0,
            yy + 4.0,
            fmt_num(v)
        );
    }
    // X ticks at each power of two present.
    let (a, b) = (xmin.ceil() as i64, xmax.floor() as i64);
    let every = ((b - a) / 12 + 1).max(1);
    let mut e = a;
    while e <= b {
        let xx = x(e as f64);
        let _ = writeln!(
            s,
            r#"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{}" stroke="black"/><text x="{xx:.1}" y="{}" text-anchor="middle">{}</text>"#,
            T + ph,
            T + ph + 5.0,
            T + ph + 18.0,
            size_label(e)
        );
        e += every;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">message size [bytes]</text>"#,
        L + pw / 2.0,
        H - 16.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">{}</text>"#,
        T + ph / 2.0,
        T + ph / 2.0,
        esc(y_label)
    );
    // The line and its points.
    if !pts.is_empty() {
        let mut d = String::new();
        for (i, p) in pts.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if i == 0 { "M" } else { " L" },
                x(p.0),
                y(p.1)
            );
        }
        let _ = writeln!(
            s,
            r##"<path d="{d}" fill="none" stroke="#1f77b4" stroke-width="2"/>"##
        );
        for p in &pts {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="3" fill="#1f77b4"><title>{} B: {}</title></circle>"##,
                x(p.0),
                y(p.1),
                (2f64).powf(p.0).round(),
                fmt_num(p.1)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn nice_ceil(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= v {
            return m * p;
        }
    }
    10.0 * p
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn size_label(e: i64) -> String {
    match e {
        0..=9 => format!("{}", 1u64 << e),
        10..=19 => format!("{}K", 1u64 << (e - 10)),
        20..=29 => format!("{}M", 1u64 << (e - 20)),
        _ => format!("2^{e}"),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_line() {
        let s = svg(
            "RDMA_Write BW <emu0>",
            "BW average [MiB/sec]",
            &[(2, 1.0), (4, 2.0), (1024, 300.0), (1 << 20, 900.0)],
        );
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<circle").count(), 4);
        assert!(s.contains("&lt;emu0&gt;"));
        assert!(s.contains(">2</text>") && s.contains(">512K</text>"), "{s}");
        // Empty sweep still gives a valid document.
        assert!(svg("t", "y", &[]).contains("</svg>"));
    }

    #[test]
    fn nice() {
        assert_eq!(nice_ceil(900.0), 1000.0);
        assert_eq!(nice_ceil(1.2), 2.0);
        assert_eq!(nice_ceil(0.3), 0.5);
    }
}
