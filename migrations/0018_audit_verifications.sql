-- The last point a verification of the audit chain reached (src/audit/verification.ts), signed, so the
-- next verification re-hashes only the rows after it.
CREATE TABLE `audit_verifications` (
	`seq` integer PRIMARY KEY NOT NULL,
	`hash` text NOT NULL,
	`from_seq` integer NOT NULL,
	`verified_at` text NOT NULL,
	`jws` text NOT NULL
);
