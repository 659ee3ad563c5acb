//! The kit's PostgreSQL: a real server, a fresh database per test.

use sqlx::{Connection, PgConnection, Row};

#[tokio::test]
async fn a_fresh_database_is_created_migrated_and_queried() {
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let db = postgres.fresh_database("migrate").await.unwrap();
    let mut conn = PgConnection::connect(&db.url).await.unwrap();

    sqlx::migrate!("tests/migrations")
        .run(&mut conn)
        .await
        .unwrap();
    sqlx::query("INSERT INTO items (name) VALUES ($1), ($2)")
        .bind("alpha")
        .bind("beta")
        .execute(&mut conn)
        .await
        .unwrap();
    let names: Vec<String> = sqlx::query("SELECT name FROM items ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .iter()
        .map(|row| row.get("name"))
        .collect();
    assert_eq!(names, ["alpha", "beta"]);

    // The constraint the migration declared is enforced by the real server.
    let duplicate = sqlx::query("INSERT INTO items (name) VALUES ('alpha')")
        .execute(&mut conn)
        .await;
    assert!(duplicate.is_err(), "unique constraint not enforced");
}

#[tokio::test]
async fn each_test_database_is_isolated() {
    let postgres = kubenest_testkit::shared_postgres().await.unwrap();
    let a = postgres.fresh_database("iso").await.unwrap();
    let b = postgres.fresh_database("iso").await.unwrap();
    assert_ne!(a.name, b.name);

    let mut conn_a = PgConnection::connect(&a.url).await.unwrap();
    sqlx::query("CREATE TABLE only_in_a (x INT)")
        .execute(&mut conn_a)
        .await
        .unwrap();
    let mut conn_b = PgConnection::connect(&b.url).await.unwrap();
    let seen: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'only_in_a'",
    )
    .fetch_one(&mut conn_b)
    .await
    .unwrap();
    assert_eq!(seen, 0);
}
