import { mkdirSync, readdirSync, statSync } from 'node:fs'
import { join, relative, sep } from 'node:path'
import type { SessionId } from '@dsh/session'
import { idFault } from '@dsh/session-persistence/backend'
import {
  createJsonlPersistence,
  decodeSessionDirName,
  encodeSessionDirName,
  JOURNAL_FILE,
  MARKER_FILE,
  MAX_DIRECT_NAME,
} from '@dsh/session-persistence-jsonl'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

const nasty = fc.constantFrom(
  '',
  '.',
  '..',
  '../x',
  '../../etc/passwd',
  'a/b',
  '/abs',
  'a\\b',
  'nul\u0000byte',
  '\u0000',
  'x'.repeat(10_000),
  '🦀'.repeat(3_000),
  'ünïcödé ✓',
  'CON',
  'Upper',
  'upper',
  '_2e',
  '=abc',
  ' ',
  'lone \ud800 surrogate',
  '\udc00',
)
const ids = fc.oneof(
  nasty,
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom('.', '/', '\\', '\u0000', 'a', 'Z', '_', '=', '%', '~'), maxLength: 12 }),
  fc.string({ unit: 'grapheme-ascii', minLength: 150, maxLength: 400 }),
)

describe('session ids become directory names', () => {
  it('encoding is reversible, lowercase-only and path-safe for every storable id', () => {
    fc.assert(
      fc.property(ids, (id) => {
        let name: string
        try {
          name = encodeSessionDirName(id)
        } catch (error) {
          expect(error).toMatchObject({ code: 'SESSION_PERSISTENCE_INVALID_ID' })
          // An id the wire cannot name (empty, too long, a dot segment, a NUL, a lone surrogate; a pair, such as an
          // emoji, is a storable character).
          expect(idFault(id)).toBeDefined()
          return
        }
        expect(name).toMatch(/^(?:[a-z0-9_-]{1,160}|=[0-9a-f]{64})$/)
        expect(name).not.toBe('.')
        expect(name).not.toBe('..')
        const decoded = decodeSessionDirName(name)
        const directLength = [...id].reduce((n, c) => n + (/^[a-z0-9-]$/.test(c) ? 1 : 3 * Buffer.byteLength(c)), 0)
        if (name.startsWith('=')) {
          // Only ids too long for a direct name are hashed (their full id lives in the header line).
          expect(decoded).toEqual({ hashed: true })
          expect(directLength).toBeGreaterThan(MAX_DIRECT_NAME)
        } else {
          expect(name).toHaveLength(directLength)
          expect(decoded).toBe(id)
        }
      }),
      { numRuns: 2000 },
    )
  })

  it('distinct ids get distinct directories (also ids differing only in case)', () => {
    fc.assert(
      fc.property(ids, ids, (a, b) => {
        fc.pre(a !== b)
        let na: string, nb: string
        try {
          na = encodeSessionDirName(a)
          nb = encodeSessionDirName(b)
        } catch {
          return
        }
        expect(na.toLowerCase()).not.toBe(nb.toLowerCase())
      }),
      { numRuns: 2000 },
    )
  })

  it('non-canonical names are not session directories', () => {
    for (const name of ['', '.', '..', '_2E', '_zz', 'A', 'a_2', '=abc', MARKER_FILE, '.x.tmp-1'])
      expect(decodeSessionDirName(name)).toBeUndefined()
    // An escaped direct character is not canonical either.
    expect(decodeSessionDirName('_61')).toBeUndefined()
  })
})

describe('ids through the backend (property)', () => {
  let parent: string
  let cleanup: () => void
  let root: string
  beforeAll(() => {
    ;({ dir: parent, cleanup } = tempDir())
    root = join(parent, 'root')
    mkdirSync(root)
  })
  afterAll(() => cleanup())

  it('every id round-trips to its own directory under the root or is rejected with INVALID_ID; nothing appears outside the root', async () => {
    const p = createJsonlPersistence({ root })
    const stored = new Map<string, number>()
    await fc.assert(
      fc.asyncProperty(ids, fc.integer({ min: 0, max: 3 }), async (id, count) => {
        const previous = stored.get(id)
        const first = previous ?? 0
        // The header is built around the id as it is, valid or not: the backend, not the session model, must refuse it.
        const target = { ...targetOf('placeholder'), header: Object.freeze({ ...targetOf('placeholder').header, id: id as SessionId }) }
        const result = await p.append(target, eventsFrom(first, count)).then(
          () => 'stored' as const,
          (error: { code?: string }) => error.code,
        )
        if (result !== 'stored') {
          expect(result).toBe('SESSION_PERSISTENCE_INVALID_ID')
          return
        }
        stored.set(id, first + count)
        const file = p.logPath(id)
        // The log is exactly two levels under the root: <root>/<one directory>/<log>.
        const rel = relative(root, file).split(sep)
        expect(rel).toHaveLength(2)
        expect(statSync(file).isFile()).toBe(true)
        const observation = await p.inspect(id as SessionId)
        expect(observation.header.id).toBe(id)
        expect(observation.events).toHaveLength(first + count)
      }),
      { numRuns: 250 },
    )
    // Outside the root: nothing.
    expect(readdirSync(parent)).toEqual(['root'])
    // Inside: the marker and one directory per stored id, each holding its log (and the held lock).
    const listed = await p.list()
    expect(listed.map((r) => r.header.id).sort()).toEqual([...stored.keys()].sort())
    const entries = readdirSync(root).sort()
    expect(entries).toEqual([MARKER_FILE, JOURNAL_FILE, ...[...stored.keys()].map(encodeSessionDirName)].sort())
    await p.close()
    for (const id of stored.keys()) expect(readdirSync(join(root, encodeSessionDirName(id)))).toEqual(['log.jsonl.zst'])
  })
})
