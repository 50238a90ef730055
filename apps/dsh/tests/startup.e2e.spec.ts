import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, expect, it } from 'vitest'
import { rootWithOneSession } from './support/root.js'

// The built CLI loads a command's modules only when that command runs: every
// module URL a process resolves is traced (tests/support/trace-imports.mjs).
// The build bundles each package into a few chunks (tooling/scripts/
// bundle-package.mjs: an entry's chunk, `<name>-shared.js` chunks, and a lazy
// chunk at the path of the module an `import()` loads, e.g.
// `commands/sessions.js`); the source modules a loaded chunk holds are read
// from its source map, so the checks below name modules as well as chunks.
const bin = join(import.meta.dirname, '..', 'dist', 'bin.js')
const trace = join(import.meta.dirname, 'support', 'trace-imports.mjs')
const dir = mkdtempSync(join(tmpdir(), 'dsh-startup-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

async function imports(...args: string[]): Promise<string[]> {
  const { stderr } = await promisify(execFile)(process.execPath, ['--import', trace, bin, ...args], { timeout: 60_000 }).catch(
    (error: { stderr: string }) => error,
  )
  return [...new Set(stderr.split('\n').flatMap((line) => (line.startsWith('IMPORT ') ? [line.slice(7)] : [])))]
}

/** The source modules (`/work/…/packages/host/host/src/query.ts`) held by the loaded dist files of our packages. */
function modulesOf(loaded: string[]): string[] {
  return loaded
    .filter((url) => /^file:.*\/dist\/.*\.js$/.test(url) && !url.includes('/node_modules/'))
    .flatMap((url) => {
      const file = fileURLToPath(url)
      const map = JSON.parse(readFileSync(`${file}.map`, 'utf8')) as { sources: string[] }
      return map.sources.map((source) => resolve(dirname(file), source))
    })
}

const heavy = [
  /better-sqlite3/,
  /zstd/,
  /apiproxy/,
  /^node:http$/,
  /session-query-sqlite/,
  /session-persistence-jsonl/,
  /\/host\/host\//,
  /\/commands\//,
]

it('dsh --help loads only the CLI shell (no host, HTTP server, SQLite, zstd or command module)', async () => {
  const loaded = await imports('--help')
  const modules = modulesOf(loaded)
  expect(modules.some((path) => path.endsWith('/apps/dsh/src/cli.ts'))).toBe(true)
  for (const pattern of heavy)
    expect(
      [...loaded, ...modules].filter((path) => pattern.test(path)),
      String(pattern),
    ).toEqual([])
}, 60_000)

it('a read command loads its own module and the host, but not the HTTP API', async () => {
  const loaded = await imports('sessions', '--root', join(dir, 'missing'))
  const modules = modulesOf(loaded)
  expect(loaded.some((url) => url.endsWith('/apps/dsh/dist/commands/sessions.js'))).toBe(true)
  expect(modules.some((path) => path.endsWith('/apps/dsh/src/commands/sessions.ts'))).toBe(true)
  expect(loaded.some((url) => /\/commands\/(serve|demo|search)\.js$/.test(url))).toBe(false)
  expect(modules.some((path) => /\/commands\/(serve|demo|search)\.ts$/.test(path))).toBe(false)
  expect(loaded.filter((url) => /apiproxy|^node:http$/.test(url))).toEqual([])
}, 60_000)

it('dsh sessions, show and search on an existing root load the query host only (no projections, cache, subagents, zod or verify)', async () => {
  const root = join(dir, 'root')
  await rootWithOneSession(root, 'listed without the catalog')
  const lighter = [
    /session-projection/,
    /\/subagent\//,
    /\/zod\//,
    /@dsh\/protocol\/?$|\/wire\/protocol\/dist\/index\.js$|\/wire\/protocol\/src\/index\.ts$/,
    /\/host\/host\/dist\/index\.js$/,
    /\/host\/host\/src\/(index|host|verify|reindex|derived-check)\.ts$/,
  ]
  const loadedBy = new Map<string, string[]>()
  for (const args of [['sessions'], ['show', 'one'], ['search', 'catalog']]) {
    const urls = await imports(...args, '--root', root, '--json')
    const loaded = [...urls, ...modulesOf(urls)]
    loadedBy.set(args[0]!, loaded)
    expect(
      loaded.some((url) => url.endsWith('/host/host/dist/query.js')),
      args.join(' '),
    ).toBe(true)
    expect(
      loaded.some((url) => /session-query-sqlite/.test(url)),
      args.join(' '),
    ).toBe(true)
    for (const pattern of lighter)
      expect(
        loaded.filter((url) => pattern.test(url)),
        `${args.join(' ')}: ${pattern}`,
      ).toEqual([])
  }
  // A listing loads the listing path only: no search statement or rule, history, in-memory scan,
  // reader worker or PostgreSQL composition (each loaded at first use), and SQLite through require,
  // its addon by path (not through the `bindings` package's lookup).
  const listing = loadedBy.get('sessions')!
  const notForListing = [
    /session-query-sqlite\/dist\/(search|reader-worker)\.js$/,
    /session-query-sqlite\/src\/(search|reader-worker)\.ts$/,
    /session-query\/dist\/index\.js$/,
    /session-query\/src\/(index|history|memory-query|search-request|search-terms|sources|plugin)\.ts$/,
    /\/host\/host\/dist\/postgres\.js$/,
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
  expect(search.some((url) => url.endsWith('/session-query-sqlite/dist/search.js'))).toBe(true)
  expect(search.some((url) => url.endsWith('/session-query-sqlite/src/search.ts'))).toBe(true)
  expect(search.some((path) => path.endsWith('/session-query/src/search-request.ts'))).toBe(true)
}, 120_000)
