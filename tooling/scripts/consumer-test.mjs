#!/usr/bin/env node
// The consumer test: what a new user gets from npm.
//   1. `pnpm pack` every publishable workspace package (built dist included;
//      pnpm rewrites `workspace:*` and `catalog:` to real versions);
//   2. `npm install` the tarballs into a fresh npm project in a temp directory
//      OUTSIDE the workspace (no workspace links; third-party packages from
//      the npm cache when it has them; native modules built with npm's
//      node-gyp against the local Node headers);
//   3. run the root README's composition example (`import { createHost }
//      from '@dsh/host'`) and `dsh demo` from there.
// Exits 0 when all of it works (.ci/run counts it as one check).
// Needs the packages built first (`turbo run build`). Usage:
//   node tooling/scripts/consumer-test.mjs [--keep]
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { repoRoot, workspacePackages } from './workspace.mjs'

const keep = process.argv.includes('--keep')
const work = mkdtempSync(join(tmpdir(), 'dsh-consumer-'))
const started = Date.now()
const env = { ...process.env }
if (!env.npm_config_nodedir && existsSync('/usr/include/node/node.h')) env.npm_config_nodedir = '/usr'
delete env.npm_config_node_gyp // npm brings its own node-gyp; a workspace setting must not leak in
env.JOBS ??= 'max' // node-gyp compiles the native modules' sources in parallel

function step(name, command, args, options = {}) {
  const t0 = Date.now()
  const result = spawnSync(command, args, { encoding: 'utf8', env, maxBuffer: 64 << 20, timeout: 15 * 60_000, ...options })
  const ms = Date.now() - t0
  if (result.status !== 0) {
    throw new Error(
      `${name} failed (${result.error?.message ?? `exit ${result.status}`}, ${ms} ms):\n${(result.stdout ?? '').slice(-4000)}\n${(result.stderr ?? '').slice(-4000)}`,
    )
  }
  console.log(`consumer: ${name} (${ms} ms)`)
  return result.stdout
}

/** The first ```js block after the given heading of a markdown file. */
export function exampleUnder(markdown, heading) {
  const at = markdown.indexOf(`\n${heading}\n`)
  const match = at < 0 ? null : /```js\n([\s\S]*?)```/.exec(markdown.slice(at))
  if (match === null) throw new Error(`README.md has no \`\`\`js block under '${heading}'.`)
  return match[1]
}

try {
  // 1. pack
  const tarballs = join(work, 'tarballs')
  mkdirSync(tarballs)
  const pnpm = join(repoRoot, 'node_modules', '.bin', 'pnpm')
  const publishable = workspacePackages().filter((p) => p.manifest.private !== true)
  for (const { dir, manifest } of publishable) {
    if ((manifest.files ?? []).includes('dist') && !existsSync(join(repoRoot, dir, 'dist'))) {
      throw new Error(`${manifest.name} has no dist/; build first (npx turbo run build).`)
    }
  }
  for (const { dir } of publishable) step(`pack ${dir}`, pnpm, ['pack', '--pack-destination', tarballs], { cwd: join(repoRoot, dir) })
  const files = readdirSync(tarballs)
    .filter((f) => f.endsWith('.tgz'))
    .map((f) => join(tarballs, f))
  if (files.length !== publishable.length) throw new Error(`expected ${publishable.length} tarballs, got ${files.length}`)

  // 2. install outside the workspace
  const app = join(work, 'app')
  mkdirSync(app)
  writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: 'dsh-consumer', private: true, type: 'module' }, null, 2)}\n`)
  step('npm install of the tarballs', 'npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...files], {
    cwd: app,
  })
  for (const { manifest } of publishable) {
    const installed = join(app, 'node_modules', manifest.name)
    if (!existsSync(join(installed, 'package.json'))) throw new Error(`${manifest.name} is not installed in ${app}`)
  }
  const linked = readdirSync(join(app, 'node_modules', '@dsh'), { withFileTypes: true }).filter((e) => e.isSymbolicLink())
  if (linked.length > 0) throw new Error(`workspace links in the consumer: ${linked.map((e) => e.name).join(', ')}`)

  // 3a. the README's composition example
  const example = exampleUnder(readFileSync(join(repoRoot, 'README.md'), 'utf8'), '## Compose it yourself')
  if (!example.includes("from '@dsh/host'")) throw new Error("the README's composition example does not import from '@dsh/host'")
  writeFileSync(join(app, 'example.mjs'), example)
  const out = step('README composition example', process.execPath, ['example.mjs', join(work, 'example-root')], {
    cwd: app,
    timeout: 120_000,
  })
  const rows = JSON.parse(out.trim().split('\n').at(-1))
  if (!Array.isArray(rows) || rows.length !== 1 || rows[0].kind !== 'child') throw new Error(`the example printed ${out}`)

  // 3b. dsh demo from the installed bin
  const bin = join(app, 'node_modules', '.bin', 'dsh')
  step('dsh --help', bin, ['--help'], { cwd: app, timeout: 60_000 })
  const demo = JSON.parse(step('dsh demo', bin, ['demo', '--json', '--root', join(work, 'demo')], { cwd: app, timeout: 300_000 }))
  if (demo.listings.live.length < 6) throw new Error(`dsh demo listed ${demo.listings.live.length} rows`)
  step('dsh agents', bin, ['agents', 'release-1.4', '--descendants', '--root', join(work, 'demo')], { cwd: app, timeout: 60_000 })

  console.log(
    `consumer: ${publishable.length} packages packed, installed outside the workspace and run in ${Math.round((Date.now() - started) / 1000)} s`,
  )
} catch (error) {
  console.error(`consumer: ${error.message}`)
  process.exitCode = 1
} finally {
  if (keep) console.log(`consumer: kept ${work}`)
  else rmSync(work, { recursive: true, force: true })
}
