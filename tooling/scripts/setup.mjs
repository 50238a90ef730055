#!/usr/bin/env node
// Installs everything a fresh clone needs, using only Node and npm:
// pnpm (the pinned version, through npx when it is not installed yet) and the
// workspace dependencies. Safe to run repeatedly: an up-to-date install is a
// no-op that takes about a second.
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const [major] = process.versions.node.split('.').map(Number)
if (major < 20) {
  console.error(`dsh needs Node 20 or newer; this is ${process.version}.`)
  process.exit(1)
}

const env = { ...process.env }
// better-sqlite3 compiles with node-gyp; point it at the local Node headers so
// it never tries to download them (there is no network for that here).
if (!env.npm_config_nodedir && existsSync('/usr/include/node/node.h')) env.npm_config_nodedir = '/usr'
// Install scripts call `node-gyp` through npm's shim, which needs to know where
// npm's own node-gyp lives; npm sets this when it runs us, a bare node does not.
if (!env.npm_config_node_gyp) {
  const bundled = join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js')
  if (existsSync(bundled)) env.npm_config_node_gyp = bundled
}

const pinned = '12.4.2'
const localPnpm = join(root, 'node_modules', '.bin', 'pnpm')
const args = ['install', existsSync(join(root, 'pnpm-lock.yaml')) ? '--frozen-lockfile' : '--no-frozen-lockfile']
const [cmd, cmdArgs] = existsSync(localPnpm) ? [localPnpm, args] : ['npx', ['-y', `pnpm@${pinned}`, ...args]]
ensureChromium()
ensurePostgres()

try {
  execFileSync(cmd, cmdArgs, { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] })
} catch (error) {
  console.error(`dsh setup: '${cmd} ${cmdArgs.join(' ')}' failed (${error.status ?? error.message}).`)
  process.exit(1)
}

// The browser tests drive Debian's Chromium through playwright-core (never a
// downloaded browser). Install it when missing and we may (root + apt-get).
function ensureChromium() {
  if (existsSync('/usr/bin/chromium') || process.env.DSH_SKIP_CHROMIUM_INSTALL === '1') return
  const canApt = typeof process.getuid === 'function' && process.getuid() === 0 && existsSync('/usr/bin/apt-get')
  if (!canApt) {
    console.warn('dsh setup: /usr/bin/chromium is missing; the browser test needs it (Debian: apt-get install chromium).')
    return
  }
  console.log('dsh setup: installing Debian chromium for the browser tests …')
  const quiet = { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }
  try {
    execFileSync('apt-get', ['update', '-qq'], quiet)
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'chromium'], quiet)
  } catch (error) {
    console.warn(`dsh setup: installing chromium failed (${error.status ?? error.message}); the browser test will fail.`)
  }
}

// The PostgreSQL backends' tests and benchmarks start a throwaway cluster with
// Debian's PostgreSQL 15 (initdb/pg_ctl in /usr/lib/postgresql/15/bin, run as
// the postgres user). Install it when missing and we may (root + apt-get).
function ensurePostgres() {
  if (existsSync('/usr/lib/postgresql/15/bin/initdb') || process.env.DSH_SKIP_POSTGRES_INSTALL === '1') return
  const canApt = typeof process.getuid === 'function' && process.getuid() === 0 && existsSync('/usr/bin/apt-get')
  if (!canApt) {
    console.warn(
      'dsh setup: /usr/lib/postgresql/15/bin/initdb is missing; the PostgreSQL tests need it (Debian: apt-get install postgresql).',
    )
    return
  }
  console.log('dsh setup: installing Debian postgresql for the PostgreSQL backend tests …')
  const quiet = { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }
  try {
    execFileSync('apt-get', ['update', '-qq'], quiet)
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'postgresql'], quiet)
  } catch (error) {
    console.warn(`dsh setup: installing postgresql failed (${error.status ?? error.message}); the PostgreSQL tests will fail.`)
  }
}
