//! `sqlx::migrate!` embeds `migrations/` when the crate compiles; without this, a migration
//! added later is not seen until some source file of the crate changes (what `sqlx migrate
//! build-script` generates).
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
