//! Aligned columns, as kubectl prints them.

use std::fmt;

use serde_json::Value;

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

    /// A table of one row per item of the JSON array `items`.
    pub fn rows<const N: usize>(
        header: [&str; N],
        items: &Value,
        row: impl Fn(&Value) -> Vec<String>,
    ) -> Self {
        let mut table = Self::new(header);
        // `-o wide` adds what every object has and the narrow table leaves out: its id and
        // when it was made.
        let wide: Vec<&str> = [("ID", "id"), ("CREATED", "created_at")]
            .into_iter()
            .filter(|(title, _)| !header.contains(title))
            .filter(|(_, key)| {
                items
                    .as_array()
                    .is_some_and(|a| a.iter().any(|i| !i[*key].is_null()))
            })
            .map(|(_, key)| key)
            .collect();
        table.wide_header = wide
            .iter()
            .map(|key| if *key == "id" { "ID" } else { "CREATED" }.to_owned())
            .collect();
        for item in items.as_array().into_iter().flatten() {
            table.push(row(item));
            table
                .wide_rows
                .push(wide.iter().map(|key| super::text(&item[*key])).collect());
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
        let items = serde_json::json!([{"name": "web", "id": "a1", "created_at": "2026-12-07"}]);
        let table = Table::rows(["NAME"], &items, |i| vec![super::super::text(&i["name"])]);
        assert_eq!(
            table.wide().to_string(),
            "NAME   ID   CREATED\nweb    a1   2026-12-07\n"
        );
        let table = Table::rows(["NAME", "ID"], &items, |i| {
            vec![super::super::text(&i["name"]), super::super::text(&i["id"])]
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
