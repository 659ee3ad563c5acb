//! The backend checks: each request writes to and reads back from PostgreSQL and Redis, so the
//! answer proves both were really reached with the connection strings the app was given.

use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _, Executor as _, Row as _};

use crate::report::{PostgresCheck, RedisCheck, Report, Row};
use crate::{Error, ServeArgs, redact};

/// The app's backends, as configured (nothing is connected until a request asks).
#[derive(Debug, Clone)]
pub struct Backends {
    postgres: Option<(PgConnectOptions, String)>,
    redis: Option<(redis::Client, String)>,
    version: String,
    hostname: String,
    timeout: Duration,
}

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS demo_visits (
    id BIGSERIAL PRIMARY KEY,
    note TEXT NOT NULL,
    at TIMESTAMPTZ NOT NULL DEFAULT now())";

impl Backends {
    /// Backends from the app's settings; fails only on a URL that cannot be one.
    pub fn new(args: &ServeArgs) -> Result<Self, Error> {
        let timeout = args.check_timeout();
        let postgres = match &args.database_url {
            Some(url) => {
                let options: PgConnectOptions = url.parse().map_err(Error::DatabaseUrl)?;
                Some((options, redact(url)))
            }
            None => None,
        };
        let redis = match &args.redis_url {
            Some(url) => Some((
                redis::Client::open(url.as_str()).map_err(Error::RedisUrl)?,
                redact(url),
            )),
            None => None,
        };
        Ok(Self {
            postgres,
            redis,
            version: args.demo_version.clone(),
            hostname: std::env::var("HOSTNAME").unwrap_or_default(),
            timeout,
        })
    }

    /// Checks both backends (at once) and reports.
    pub async fn report(&self) -> Report {
        let note = format!("written by {} running {}", self.hostname, self.version);
        let (postgres, redis) = tokio::join!(self.postgres(&note), self.redis(&note));
        Report::new(&self.version, &self.hostname, postgres, redis)
    }

    async fn postgres(&self, note: &str) -> PostgresCheck {
        let Some((options, target)) = &self.postgres else {
            return PostgresCheck::default();
        };
        let mut check = PostgresCheck {
            configured: true,
            target: Some(target.clone()),
            ..Default::default()
        };
        match tokio::time::timeout(self.timeout, write_and_read_row(options, note)).await {
            Ok(Ok((server, row))) => {
                check.connected = true;
                check.read_back = row.note == note;
                check.server = Some(server);
                check.row = Some(row);
            }
            Ok(Err(e)) => check.error = Some(e.to_string()),
            Err(_) => check.error = Some(format!("no answer within {:?}", self.timeout)),
        }
        check
    }

    async fn redis(&self, value: &str) -> RedisCheck {
        let Some((client, target)) = &self.redis else {
            return RedisCheck::default();
        };
        let key = format!("kubenest-demo:{}", uuid::Uuid::new_v4().simple());
        let mut check = RedisCheck {
            configured: true,
            target: Some(target.clone()),
            key: Some(key.clone()),
            ..Default::default()
        };
        match tokio::time::timeout(self.timeout, set_and_get(client, &key, value)).await {
            Ok(Ok(got)) => {
                check.connected = true;
                check.read_back = got.as_deref() == Some(value);
                check.value = got;
            }
            Ok(Err(e)) => check.error = Some(e.to_string()),
            Err(_) => check.error = Some(format!("no answer within {:?}", self.timeout)),
        }
        check
    }
}

/// Connects (a connection of its own: the answer then says why a connection fails, where a
/// pool would only time out), creates the table if missing, inserts a row and reads it back.
async fn write_and_read_row(
    options: &PgConnectOptions,
    note: &str,
) -> Result<(String, Row), sqlx::Error> {
    let mut conn = options.connect().await?;
    if let Err(first) = conn.execute(CREATE_TABLE).await {
        // Two replicas creating the table at once: one loses with a unique violation on the
        // catalog; by then the table exists.
        if conn.execute(CREATE_TABLE).await.is_err() {
            return Err(first);
        }
    }
    let server: String = sqlx::query_scalar("SELECT version()")
        .fetch_one(&mut conn)
        .await?;
    let id: i64 = sqlx::query_scalar("INSERT INTO demo_visits (note) VALUES ($1) RETURNING id")
        .bind(note)
        .fetch_one(&mut conn)
        .await?;
    let row = sqlx::query("SELECT id, note FROM demo_visits WHERE id = $1")
        .bind(id)
        .fetch_one(&mut conn)
        .await?;
    let _ = conn.close().await;
    Ok((
        server,
        Row {
            id: row.try_get("id")?,
            note: row.try_get("note")?,
        },
    ))
}

/// Sets `key` to `value` (expiring in an hour: requests must not fill the cache) and reads it.
async fn set_and_get(
    client: &redis::Client,
    key: &str,
    value: &str,
) -> Result<Option<String>, redis::RedisError> {
    let mut conn = client.get_multiplexed_async_connection().await?;
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("EX")
        .arg(3600)
        .query_async::<()>(&mut conn)
        .await?;
    redis::cmd("GET").arg(key).query_async(&mut conn).await
}
