import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createHost } from '@dsh/host'
import { afterAll, expect, it } from 'vitest'
import { rootWithOneSession } from './support/root.js'

// The built CLI loads a command's modules only when that command runs: every
// module URL a process resolves is traced (tests/support/trace-imports.mjs).
// The build bundles the CLI with the workspace packages and zod it uses
// (tooling/scripts/bundle-package.mjs --inline), as a CommonJS program
// (`--commonjs bin.js`: `dist/bin.cjs`): its own chunks keep their places
// (`commands/sessions.cjs`, `<name>-shared.cjs`), an inlined package's are
// under `vendor/<package>/` (`vendor/@dsh/session-query-sqlite/dist/
// search.cjs`), and zod is one chunk, not 95 files. The source modules a loaded
// chunk holds are read from its source map (`packages/<layer>/<pkg>/src/*.ts`,
// zod's own files), so the checks below name modules as well as chunks; the
// file counts bound what a command loads (CommonJS files included).
const bin = join(import.meta.dirname, '..', 'dist', 'bin.cjs')
const trace = join(import.meta.dirname, 'support', 'trace-imports.mjs')
const dir = mkdtempSync(join(tmpdir(), 'dsh-startup-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

async function imports(...args: string[]): Promise<string[]> {
  const { stderr } = await promisify(execFile)(process.execPath, ['--import', trace, bin, ...args], { timeout: 60_000 }).catch(
    (error: { stderr: string }) => error,
  )
  return [...new Set(stderr.split('\n').flatMap((line) => (line.startsWith('IMPORT ') ? [line.slice(7)] : [])))]
}

/** The source modules (`/work/…/packages/host/host/src/query-host.ts`) held by the loaded dist files of our packages. */
function modulesOf(loaded: string[]): string[] {
  return loaded
    .filter((url) => /^file:.*\/dist\/.*\.c?js$/.test(url) && !url.includes('/node_modules/'))
    .flatMap((url) => {
      const file = fileURLToPath(url)
      // A facade chunk (one `export … from` line, where a lazy import's module lives in a shared chunk) has no map and holds no module.
      if (!existsSync(`${file}.map`)) return []
      const map = JSON.parse(readFileSync(`${file}.map`, 'utf8')) as { sources: string[] }
      return map.sources.map((source) => resolve(dirname(file), source))
    })
}

/** Module files (ESM and CommonJS; builtins are not files). */
const files = (loaded: string[]): string[] => loaded.filter((url) => url.startsWith('file:'))

const heavy = [
  /better-sqlite3/,
  /zstd/,
  /apiproxy/,
  /^node:http$/,
  /\/query\/sqlite\//,
  /session-query-sqlite/,
  /\/persistence\/jsonl\//,
  /session-persistence-jsonl/,
  /\/host\/host\//,
  /\/@dsh\/host\//,
  /\/commands\//,
  /\/zod\//,
]

it('dsh --help loads only the CLI shell (no host, HTTP server, SQLite, zstd, zod or command module)', async () => {
  const loaded = await imports('--help')
  const modules = modulesOf(loaded)
  expect(modules.some((path) => path.endsWith('/apps/dsh/src/cli.ts'))).toBe(true)
  for (const pattern of heavy)
    expect(
      [...loaded, ...modules].filter((path) => pattern.test(path)),
      String(pattern),
    ).toEqual([])
  // bin.cjs, the shell's chunk (cli, commands table, errors) and @dsh/context's.
  expect(files(loaded).length).toBeLessThanOrEqual(3)
})

it('a read command loads its own module and the host, but not the HTTP API', async () => {
  const loaded = await imports('sessions', '--root', join(dir, 'missing'))
  const modules = modulesOf(loaded)
  expect(loaded.some((url) => url.endsWith('/apps/dsh/dist/commands/sessions.cjs'))).toBe(true)
  expect(modules.some((path) => path.endsWith('/apps/dsh/src/commands/sessions.ts'))).toBe(true)
  expect(loaded.some((url) => /\/commands\/(serve|demo|search)\.c?js$/.test(url))).toBe(false)
  expect(modules.some((path) => /\/commands\/(serve|demo|search)\.ts$/.test(path))).toBe(false)
  expect([...loaded, ...modules].filter((url) => /apiproxy|^node:http$/.test(url))).toEqual([])
})

it('dsh sessions, show and search on an existing root load the query host only (no projection registry, subagents, zod or verify)', async () => {
  const root = join(dir, 'root')
  await rootWithOneSession(root, 'listed without the catalog')
  const lighter = [
    /\/subagent\//,
    /@dsh\/subagent/,
    /\/wire\/protocol\/src\/index\.ts$/,
    /\/host\/host\/src\/(index|host|verify|reindex|derived-check)\.ts$/,
  ]
  // show and search load no projection module and no zod at all. The listing shows each session's
  // cached title, tokens and cost: it reads the checkpoint rows through the cache's read-only reader
  // and checks them against the stats units' schemas (what is validated stays validated) and a valid
  // price table against its own, all plain checks: it loads the stats and cache packages but no zod,
  // the projection registry or the PostgreSQL cache.
  const noProjections = [/\/projection\//, /session-projection/, /\/zod\//]
  const listingOnly = [
    /\/projection\/(registry|cache-postgres)\//,
    /@dsh\/session-projection\/dist\//,
    /session-projection-cache-postgres/,
    /\/zod\//,
    /\/projection\/stats\/src\/price-table-zod\.ts$/,
  ]
  const prices = join(dir, 'prices.json')
  writeFileSync(prices, JSON.stringify({ currency: 'USD', providers: { p: { m: { input: 1, output: 4 } } } }))
  const loadedBy = new Map<string, string[]>()
  // At most: the CLI's and the query host's chunks (the protocol's size caps among them, which the
  // persistence backends apply to every read), better-sqlite3's 13 CommonJS files and its addon;
  // the listing also the price table's chunk, the stats chunk and the cache's two;
  // show also the persistence contract's attachments chunk (the JSONL backend and the contract's helpers share it).
  const bound: Record<string, number> = { sessions: 30, show: 31, search: 30 }
  for (const args of [
    ['sessions', '--prices', prices],
    ['show', 'one'],
    ['search', 'catalog'],
  ]) {
    const urls = await imports(...args, '--root', root, '--json')
    const loaded = [...urls, ...modulesOf(urls)]
    loadedBy.set(args[0]!, loaded)
    expect(
      loaded.some((path) => path.endsWith('/host/host/src/query-host.ts')),
      args.join(' '),
    ).toBe(true)
    expect(
      loaded.some((path) => /\/query\/sqlite\/src\//.test(path)),
      args.join(' '),
    ).toBe(true)
    for (const pattern of [...lighter, ...(args[0] === 'sessions' ? listingOnly : noProjections)])
      expect(
        loaded.filter((url) => pattern.test(url)),
        `${args.join(' ')}: ${pattern}`,
      ).toEqual([])
    expect(files(urls).length, args.join(' ')).toBeLessThanOrEqual(bound[args[0]!]!)
  }
  // A listing loads the listing path only: no search statement or rule, history, in-memory scan,
  // reader worker or PostgreSQL composition (each loaded at first use), and SQLite through require,
  // its addon by path (not through the `bindings` package's lookup).
  const listing = loadedBy.get('sessions')!
  // The cached values: the read-only reader, the listing's schema checks, the price table's.
  for (const module of [
    /\/projection\/cache\/src\/reader\.ts$/,
    /\/projection\/stats\/src\/listing\.ts$/,
    /\/projection\/stats\/src\/plain-check\.ts$/,
    /\/projection\/stats\/src\/price-table\.ts$/,
  ])
    expect(
      listing.some((path) => module.test(path)),
      `sessions: ${module}`,
    ).toBe(true)
  const notForListing = [
    /session-query-sqlite\/dist\/(search|reader-worker)\.c?js$/,
    /\/query\/sqlite\/src\/(search|reader-worker)\.ts$/,
    /session-query\/dist\/index\.c?js$/,
    /\/query\/contract\/src\/(index|history|memory-query|search-request|search-terms|sources|plugin)\.ts$/,
    /host\/dist\/postgres\.c?js$/,
    /\/host\/host\/src\/postgres\.ts$/,
    /^node:worker_threads$/,
    /\/bindings\/bindings\.js$/,
  ]
  for (const pattern of notForListing)
    expect(
      listing.filter((url) => pattern.test(url)),
      `sessions: ${pattern}`,
    ).toEqual([])
  expect(listing.some((url) => /better-sqlite3\/lib\/index\.js$/.test(url))).toBe(true)
  expect(listing.some((url) => /better-sqlite3\/build\/Release\/better_sqlite3\.node$/.test(url))).toBe(true)
  // The same modules arrive when a command needs them: search loads the search statements and rules.
  const search = loadedBy.get('search')!
  expect(search.some((url) => url.endsWith('/session-query-sqlite/dist/search.cjs'))).toBe(true)
  expect(search.some((url) => url.endsWith('/query/sqlite/src/search.ts'))).toBe(true)
  expect(search.some((path) => path.endsWith('/query/contract/src/search-request.ts'))).toBe(true)
})

it('dsh agents on a warm root loads the catalog and no zod, spawn schemas or checks, tool schemas, HTTP, search or PostgreSQL backend', async () => {
  const root = join(dir, 'family')
  const host = await createHost({ root })
  try {
    const parent = host.sessions.create({ id: 'parent' })
    parent.append('user/message', { text: 'two children' })
    for (const [i, mode] of (['one-shot', 'continuable'] as const).entries())
      await host.subagents.spawn(parent, { id: `child-${i}`, mode, label: `worker ${i}`, context: 'fresh', prompt: 'go' }).done
  } finally {
    await host.dispose()
  }
  // Every row comes from the checkpoint cache, its tokens and duration too: the path below is the warm one.
  const { stdout } = await promisify(execFile)(process.execPath, [bin, 'agents', 'parent', '--root', root, '--json'])
  const rows = (JSON.parse(stdout) as { rows: Array<{ rung: number; tokens: unknown; durationMs: unknown }> }).rows
  expect(rows.map((row) => [row.rung, typeof row.tokens, typeof row.durationMs])).toEqual([
    [2, 'number', 'number'],
    [2, 'number', 'number'],
  ])
  const loaded = await imports('agents', 'parent', '--root', root)
  const modules = modulesOf(loaded)
  expect(modules.some((path) => path.endsWith('/apps/dsh/src/commands/agents.ts'))).toBe(true)
  // The cached rows and any folded descriptor are checked by the units' plain checks: no zod file is
  // loaded, nor the spawn schemas (zod/mini) or the outputSchema checks (classic zod) a writable runtime loads.
  expect(modules.some((path) => /\/subagent\/runtime\/src\/projection\.ts$/.test(path))).toBe(true)
  expect(modules.some((path) => /\/projection\/stats\/src\/stats-types\.ts$/.test(path))).toBe(true)
  for (const pattern of [/\/zod\//, /\/subagent\/runtime\/src\/(schemas|output)\.ts$/])
    expect(
      [...loaded, ...modules].filter((url) => pattern.test(url)),
      `agents: ${pattern}`,
    ).toEqual([])
  const notForAgents = [
    /\/subagent\/tools\/src\/(?!list-agents-table\.ts$)/,
    /apiproxy|^node:http$/,
    /session-query-sqlite\/dist\/(search|reader-worker)\.c?js$|\/query\/sqlite\/src\/(search|reader-worker)\.ts$/,
    /\/persistence\/postgres\/|\/query\/postgres\/|\/projection\/cache-postgres\//,
    /^node:worker_threads$/,
  ]
  for (const pattern of notForAgents)
    expect(
      [...loaded, ...modules].filter((url) => pattern.test(url)),
      `agents: ${pattern}`,
    ).toEqual([])
  // The CLI's chunks and the inlined packages' (the protocol's size caps, the projection registry's
  // errors as a chunk the cache shares, and the stats package's two for the rows' tokens),
  // better-sqlite3's 13 files and addon.
  expect(files(loaded).length).toBeLessThanOrEqual(38)
})
