//! Aligned columns, as kubectl prints them.

use std::fmt;

use super::listed::Listed;

/// A header and rows of cells, printed with each column as wide as its widest cell.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// `-o wide`'s further columns: their header, and each row's cells.
    wide_header: Vec<String>,
    wide_rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<const N: usize>(header: [&str; N]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            ..Self::default()
        }
    }

    /// A table of one row per item of `items`.
    pub fn rows<const N: usize, T: Listed>(
        header: [&str; N],
        items: &[T],
        row: impl Fn(&T) -> Vec<String>,
    ) -> Self {
        let mut table = Self::new(header);
        // `-o wide` adds what every object has and the narrow table leaves out: its id and
        // when it was made.
        let id = !header.contains(&"ID") && items.iter().any(|i| i.id().is_some());
        let created = items.iter().any(|i| i.created_at().is_some());
        if id {
            table.wide_header.push("ID".into());
        }
        if created {
            table.wide_header.push("CREATED".into());
        }
        for item in items {
            table.push(row(item));
            let mut wide = Vec::new();
            if id {
                wide.push(super::opt(&item.id()));
            }
            if created {
                wide.push(super::opt(&item.created_at()));
            }
            table.wide_rows.push(wide);
        }
        table
    }

    /// The table with `-o wide`'s further columns.
    pub fn wide(mut self) -> Self {
        let wide_rows = std::mem::take(&mut self.wide_rows);
        if self.wide_header.is_empty() || self.header.is_empty() {
            return self;
        }
        self.header.append(&mut self.wide_header);
        for (row, mut more) in self.rows.iter_mut().zip(wide_rows) {
            row.append(&mut more);
        }
        self
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Key/value lines (`Name:  web`), for one object.
    pub fn fields(fields: &[(&str, String)]) -> Self {
        let mut table = Self::default();
        for (key, value) in fields {
            table.push(vec![format!("{key}:"), value.clone()]);
        }
        table
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain(std::iter::once(self.header.len()))
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut line = |row: &[String]| -> fmt::Result {
            let mut out = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    out.push_str(cell);
                } else {
                    out.push_str(&format!("{cell:<width$}   ", width = widths[i]));
                }
            }
            writeln!(f, "{}", out.trim_end())
        };
        if !self.header.is_empty() {
            line(&self.header)?;
        }
        for row in &self.rows {
            line(row)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut table = Table::new(["NAME", "STATE"]);
        table.push(vec!["east-cluster".into(), "connected".into()]);
        table.push(vec!["w".into(), "-".into()]);
        assert_eq!(
            table.to_string(),
            "NAME           STATE\neast-cluster   connected\nw              -\n"
        );
    }

    #[test]
    fn wide_adds_the_id_and_creation_time_a_table_leaves_out() {
        let items = [kubenest_api::users::UserView {
            username: "web".into(),
            id: "a1".into(),
            platform_admin: false,
            disabled: false,
            created_at: "2026-12-07".into(),
        }];
        let table = Table::rows(["NAME"], &items, |i| vec![i.username.clone()]);
        assert_eq!(
            table.wide().to_string(),
            "NAME   ID   CREATED\nweb    a1   2026-12-07\n"
        );
        let table = Table::rows(["NAME", "ID"], &items, |i| {
            vec![i.username.clone(), i.id.clone()]
        });
        assert_eq!(
            table.wide().to_string(),
            "NAME   ID   CREATED\nweb    a1   2026-12-07\n"
        );
    }

    #[test]
    fn fields_align_their_values() {
        let table = Table::fields(&[("Name", "web".into()), ("Phase", "Running".into())]);
        assert_eq!(table.to_string(), "Name:    web\nPhase:   Running\n");
    }
}
