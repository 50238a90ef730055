import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createHost } from '@dsh/host'
import { afterAll, expect, it } from 'vitest'

// The built CLI loads a command's modules only when that command runs: every
// module URL a process resolves is traced (tests/support/trace-imports.mjs).
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
  expect(loaded.some((url) => url.endsWith('/cli.js'))).toBe(true)
  for (const pattern of heavy)
    expect(
      loaded.filter((url) => pattern.test(url)),
      String(pattern),
    ).toEqual([])
}, 60_000)

it('a read command loads its own module and the host, but not the HTTP API', async () => {
  const loaded = await imports('sessions', '--root', join(dir, 'missing'))
  expect(loaded.some((url) => url.endsWith('/commands/sessions.js'))).toBe(true)
  expect(loaded.some((url) => /\/commands\/(serve|demo|search)\.js$/.test(url))).toBe(false)
  expect(loaded.filter((url) => /apiproxy|^node:http$/.test(url))).toEqual([])
}, 60_000)

it('dsh sessions, show and search on an existing root load the query host only (no projections, cache, subagents, zod or verify)', async () => {
  const root = join(dir, 'root')
  const host = await createHost({ root })
  try {
    const session = host.sessions.create({ id: 'one' })
    session.append('user/message', { text: 'listed without the catalog' })
    await host.sessions.flush(session)
  } finally {
    await host.dispose()
  }
  const lighter = [
    /session-projection/,
    /\/subagent\//,
    /\/zod\//,
    /@dsh\/protocol\/?$|\/wire\/protocol\/dist\/index\.js$/,
    /\/host\/host\/dist\/(index|host|verify|reindex|derived-check)\.js$/,
  ]
  const loadedBy = new Map<string, string[]>()
  for (const args of [['sessions'], ['show', 'one'], ['search', 'catalog']]) {
    const loaded = await imports(...args, '--root', root, '--json')
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
    /session-query\/dist\/(index|history|memory-query|search-request|search-terms|sources|plugin)\.js$/,
    /\/host\/host\/dist\/postgres\.js$/,
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
  expect(search.some((url) => url.endsWith('/session-query/dist/search-request.js'))).toBe(true)
}, 120_000)
