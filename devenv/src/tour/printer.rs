//! Where the tour's lines go.

use kubenest_cli::cmd::Table;

/// Where the tour's lines go: standard output, and kept for a test to look at.
#[derive(Debug, Default)]
pub struct Printer {
    pub lines: Vec<String>,
    quiet: bool,
}

impl Printer {
    pub fn stdout() -> Self {
        Self::default()
    }

    /// Keeps the lines without printing them (tests print them to stderr on failure).
    pub fn quiet() -> Self {
        Self {
            lines: Vec::new(),
            quiet: true,
        }
    }

    pub(super) fn line(&mut self, line: impl Into<String>) {
        let line = line.into();
        if !self.quiet {
            println!("{line}");
        }
        self.lines.push(line);
    }

    pub(super) fn step(&mut self, number: usize, title: &str) {
        self.line("");
        self.line(format!("== {number}. {title}"));
    }

    pub(super) fn table(&mut self, table: &Table) {
        for line in table.to_string().lines() {
            self.line(format!("   {line}"));
        }
    }
}
