// Runs the session tables' migration on one database and prints its report
// as one JSON line; a test kills it mid-way.
import { migrate } from '@dsh/session-persistence-postgres'
import pg from 'pg'

const [url] = process.argv.slice(2)
const pool = new pg.Pool({ connectionString: url, max: 1 })
try {
  console.log(`migrated ${JSON.stringify(await migrate(pool))}`)
} finally {
  await pool.end()
}
