//! Plain-text tables for people: columns padded to their widest cell; a table printed a
//! page at a time ([`Streamed`]) keeps its columns' widths from page to page.

/// One line: cells padded to `widths`, two spaces between columns, no trailing spaces.
fn line<'a>(widths: &[usize], cells: impl Iterator<Item = &'a str>, out: &mut String) {
    let mut s = String::new();
    for (i, cell) in cells.enumerate() {
        if i > 0 {
            s.push_str("  ");
        }
        s.push_str(cell);
        let pad = widths
            .get(i)
            .copied()
            .unwrap_or(0)
            .saturating_sub(cell.chars().count());
        s.extend(std::iter::repeat_n(' ', pad));
    }
    out.push_str(s.trim_end());
    out.push('\n');
}

/// Widen `widths` to fit `rows`.
fn widen(widths: &mut [usize], rows: &[Vec<String>]) {
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
}

/// Render rows under a header, two spaces between columns, no trailing spaces.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut t = Streamed::new(header);
    t.page(rows)
}

/// A table printed a page at a time: the header before the first page; columns only ever
/// widen, so that a page's rows line up with the ones before as far as they can.
pub struct Streamed {
    header: Vec<String>,
    widths: Vec<usize>,
    started: bool,
}

impl Streamed {
    pub fn new(header: &[&str]) -> Streamed {
        Streamed {
            header: header.iter().map(|h| h.to_string()).collect(),
            widths: header.iter().map(|h| h.chars().count()).collect(),
            started: false,
        }
    }

    /// The next page's lines (with the header first if this is the first page).
    pub fn page(&mut self, rows: &[Vec<String>]) -> String {
        widen(&mut self.widths, rows);
        let mut out = String::new();
        if !self.started {
            self.started = true;
            line(
                &self.widths,
                self.header.iter().map(String::as_str),
                &mut out,
            );
        }
        for row in rows {
            line(&self.widths, row.iter().map(String::as_str), &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pads_columns() {
        let t = super::render(&["a", "bb"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "a    bb\nxyz  1\n");
    }

    #[test]
    fn pages_keep_the_header_once_and_widen() {
        let mut t = super::Streamed::new(&["a", "bb"]);
        assert_eq!(t.page(&[vec!["x".into(), "1".into()]]), "a  bb\nx  1\n");
        assert_eq!(t.page(&[vec!["xyz".into(), "2".into()]]), "xyz  2\n");
        assert_eq!(t.page(&[vec!["y".into(), "3".into()]]), "y    3\n");
    }
}
