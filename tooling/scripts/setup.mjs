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
ensureDebianPackages()

try {
  execFileSync(cmd, cmdArgs, { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] })
} catch (error) {
  console.error(`dsh setup: '${cmd} ${cmdArgs.join(' ')}' failed (${error.status ?? error.message}).`)
  process.exit(1)
}

// Debian packages the tests call, installed when missing and we may (root +
// apt-get), with one apt-get run for all of them; `DSH_SKIP_<NAME>_INSTALL=1`
// skips one. The browser tests drive Debian's Chromium through playwright-core
// (never a downloaded browser); the PostgreSQL backends' tests and benchmarks
// start a throwaway cluster with PostgreSQL 15 (initdb/pg_ctl, run as the
// postgres user); the JSONL tests read logs back with the `zstd` CLI and kill
// writers at a chosen system call with `strace` (its fault injection).
function ensureDebianPackages() {
  const wanted = [
    { name: 'chromium', file: '/usr/bin/chromium', purpose: 'the browser test' },
    { name: 'postgresql', file: '/usr/lib/postgresql/15/bin/initdb', purpose: 'the PostgreSQL tests' },
    { name: 'zstd', file: '/usr/bin/zstd', purpose: 'the JSONL format tests' },
    { name: 'strace', file: '/usr/bin/strace', purpose: 'the JSONL crash tests' },
  ].filter((p) => !existsSync(p.file) && process.env[`DSH_SKIP_${p.name.toUpperCase()}_INSTALL`] !== '1')
  if (wanted.length === 0) return
  const names = wanted.map((p) => p.name).join(' ')
  const canApt = typeof process.getuid === 'function' && process.getuid() === 0 && existsSync('/usr/bin/apt-get')
  if (!canApt) {
    for (const p of wanted) console.warn(`dsh setup: ${p.file} is missing, needed by ${p.purpose} (Debian: apt-get install ${p.name}).`)
    return
  }
  console.log(`dsh setup: installing Debian ${names} for ${wanted.map((p) => p.purpose).join(', ')} …`)
  const quiet = { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }
  try {
    execFileSync('apt-get', ['update', '-qq'], quiet)
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', ...wanted.map((p) => p.name)], quiet)
  } catch (error) {
    console.warn(
      `dsh setup: installing ${names} failed (${error.status ?? error.message}); ${wanted.map((p) => p.purpose).join(', ')} will fail.`,
    )
  }
}
