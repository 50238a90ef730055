import { execFile, execFileSync, spawn } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import { PostgresPersistenceError } from '../errors.js'

const run = promisify(execFile)

/** Where Debian's `postgresql` package puts the server binaries. */
export const DEFAULT_PG_BIN = '/usr/lib/postgresql/15/bin'

/** How a test process reaches a running throwaway cluster (JSON-serializable, for vitest `provide`). */
export interface TestClusterAddress {
  readonly host: string
  readonly port: number
  /** Superuser with trust authentication on 127.0.0.1. */
  readonly user: string
  readonly dataDir: string
  readonly binDir: string
}

export interface TestCluster extends TestClusterAddress {
  /** A `postgres://` URL of `database` (default `postgres`). */
  connectionString(database?: string): string
  /** Creates a fresh, empty database and returns its connection string. */
  createDatabase(name?: string): Promise<string>
  /** `pg_ctl restart -m fast`: every connection is cut, the data survives. */
  restart(): Promise<void>
  /**
   * `pg_ctl stop -m fast`: every connection is cut and new ones are refused
   * until `startServer`; the data and the port are kept (an outage).
   */
  stopServer(): Promise<void>
  /** Starts a server stopped by `stopServer` again, on the same port, and resolves once it accepts connections. */
  startServer(): Promise<void>
  /** Stops the server (immediate) and removes its data directory. Idempotent. */
  stop(): Promise<void>
}

export interface StartTestClusterOptions {
  /** Directory holding `initdb`, `pg_ctl` and `postgres` (default {@link DEFAULT_PG_BIN}). */
  readonly binDir?: string
  /** Extra `postgresql.conf` settings, e.g. `{ fsync: 'off' }`. */
  readonly settings?: Readonly<Record<string, string>>
}

let databases = 0

/** Polls the test process (argv[1]); when it is gone, stops the cluster (argv[2]: the pg_ctl command) and removes its directory (argv[3]). */
const WATCHDOG = `
const [pid, stop, base] = process.argv.slice(1)
const { execFileSync } = require('node:child_process')
const { rmSync } = require('node:fs')
const alive = () => { try { process.kill(Number(pid), 0); return true } catch (error) { return error.code === 'EPERM' } }
const timer = setInterval(() => {
  if (alive()) return
  clearInterval(timer)
  const [cmd, args] = JSON.parse(stop)
  try { execFileSync(cmd, args, { stdio: 'ignore' }) } catch {}
  rmSync(base, { recursive: true, force: true })
}, 500)
`

/**
 * Starts a private PostgreSQL cluster for one test run: `initdb` into a fresh
 * temp directory (as the `postgres` system user when running as root, since
 * initdb refuses root), a free port on 127.0.0.1, the socket in the data
 * directory. A process exit handler stops it if the caller never does.
 *
 * Fails with `POSTGRES_PERSISTENCE_TEST_CLUSTER` and an install hint when the
 * binaries are missing.
 */
export async function startTestCluster(options: StartTestClusterOptions = {}): Promise<TestCluster> {
  const binDir = options.binDir ?? process.env.DSH_PG_BIN ?? DEFAULT_PG_BIN
  const initdb = join(binDir, 'initdb')
  if (!existsSync(initdb)) {
    throw new PostgresPersistenceError(
      'POSTGRES_PERSISTENCE_TEST_CLUSTER',
      `PostgreSQL 15 is not installed: ${initdb} is missing. Install it with 'apt-get install -y postgresql' (Debian/Ubuntu, as root; 'node tooling/scripts/setup.mjs' does it), or point DSH_PG_BIN at a directory holding initdb and pg_ctl.`,
    )
  }
  const asRoot = process.getuid?.() === 0
  const base = mkdtempSync(join(tmpdir(), 'dsh-pg-'))
  const dataDir = join(base, 'data')
  const owner = asRoot ? postgresUser() : undefined
  const as = (cmd: string, args: string[]): [string, string[]] =>
    owner === undefined ? [cmd, args] : ['runuser', ['-u', 'postgres', '--', cmd, ...args]]
  if (owner !== undefined) chownSync(base, owner.uid, owner.gid)
  chmodSync(base, 0o700)
  const user = 'postgres'
  try {
    await run(...as(initdb, ['-D', dataDir, '-A', 'trust', '-U', user, '--no-sync', '-E', 'UTF8', '--locale=C']))
  } catch (error) {
    rmSync(base, { recursive: true, force: true })
    throw clusterError(`initdb failed in ${dataDir}`, error)
  }
  const port = await freePort()
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: `'${base}'`,
    max_connections: '200',
    ...options.settings,
  }
  const pgCtl = join(binDir, 'pg_ctl')
  const serverOptions = Object.entries(settings)
    .map(([key, value]) => `-c ${key}=${value}`)
    .join(' ')
  const start = () => run(...as(pgCtl, ['-D', dataDir, '-o', serverOptions, '-l', join(base, 'server.log'), '-w', '-t', '60', 'start']))
  try {
    await start()
  } catch (error) {
    rmSync(base, { recursive: true, force: true })
    throw clusterError(`pg_ctl start failed on port ${port}`, error)
  }
  // A process killed with SIGKILL runs no exit handler: a detached watchdog
  // stops the cluster and removes its directory once this process is gone.
  const stopArgs = as(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop'])
  const watchdog = spawn(process.execPath, ['-e', WATCHDOG, String(process.pid), JSON.stringify(stopArgs), base], {
    detached: true,
    stdio: 'ignore',
  })
  watchdog.unref()
  let stopped = false
  const stopNow = () => {
    if (stopped) return
    stopped = true
    try {
      watchdog.kill('SIGKILL')
    } catch {
      // Already gone.
    }
    try {
      execFileSync(...as(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop']), { stdio: 'ignore' })
    } catch {
      // Already stopped.
    }
    rmSync(base, { recursive: true, force: true })
  }
  process.once('exit', stopNow)
  const address: TestClusterAddress = { host: '127.0.0.1', port, user, dataDir, binDir }
  return {
    ...address,
    connectionString: (database = 'postgres') => clusterUrl(address, database),
    createDatabase: (name) => createTestDatabase(address, name),
    async restart() {
      await run(...as(pgCtl, ['-D', dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']))
      await start()
    },
    async stopServer() {
      await run(...as(pgCtl, ['-D', dataDir, '-m', 'fast', '-w', '-t', '60', 'stop']))
    },
    async startServer() {
      await start()
    },
    async stop() {
      process.removeListener('exit', stopNow)
      stopNow()
    },
  }
}

/** The `postgres://` URL of `database` on a running test cluster. */
export function clusterUrl(address: TestClusterAddress, database = 'postgres'): string {
  return `postgres://${address.user}@${address.host}:${address.port}/${encodeURIComponent(database)}`
}

/** Creates a fresh database on a running cluster (another process may have started it) and returns its URL. */
export async function createTestDatabase(address: TestClusterAddress, name?: string): Promise<string> {
  const database = name ?? `t_${process.pid}_${++databases}_${Math.random().toString(36).slice(2, 8)}`
  const client = new pg.Client({ connectionString: clusterUrl(address) })
  await client.connect()
  try {
    // Identifiers cannot be parameters: the name is quoted by the server's own quoting function.
    const { rows } = await client.query<{ q: string }>('SELECT quote_ident($1) AS q', [database])
    await client.query(`CREATE DATABASE ${rows[0]!.q}`)
  } finally {
    await client.end()
  }
  return clusterUrl(address, database)
}

function postgresUser(): { uid: number; gid: number } {
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim())
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim())
    return { uid, gid }
  } catch (error) {
    throw clusterError("there is no 'postgres' system user to run initdb as (initdb refuses root); install the postgresql package", error)
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

function clusterError(what: string, cause: unknown): PostgresPersistenceError {
  const stderr = (cause as { stderr?: unknown })?.stderr
  return new PostgresPersistenceError(
    'POSTGRES_PERSISTENCE_TEST_CLUSTER',
    `Starting the throwaway PostgreSQL cluster failed: ${what}.${typeof stderr === 'string' && stderr.length > 0 ? ` ${stderr.trim()}` : ''}`,
    { cause },
  )
}
