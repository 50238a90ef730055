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

const pinned = '12.4.2'
const localPnpm = join(root, 'node_modules', '.bin', 'pnpm')
const args = ['install', existsSync(join(root, 'pnpm-lock.yaml')) ? '--frozen-lockfile' : '--no-frozen-lockfile']
const [cmd, cmdArgs] = existsSync(localPnpm)
  ? [localPnpm, args]
  : ['npx', ['-y', `pnpm@${pinned}`, ...args]]
try {
  execFileSync(cmd, cmdArgs, { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] })
} catch (error) {
  console.error(`dsh setup: '${cmd} ${cmdArgs.join(' ')}' failed (${error.status ?? error.message}).`)
  process.exit(1)
}
