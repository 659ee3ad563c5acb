-- Failed logins are counted per address, and per user at an address; never per user across
-- addresses, which let anyone lock anyone out. Every query now starts from the address
-- (`login_failures_address_idx`), so the index on the user alone only slows the inserts.
DROP INDEX login_failures_user_idx;
