import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { eventsFrom, targetOf, tempDir } from './helpers.js'

/**
 * A process that only follows a root's change feed — `dsh sessions` on an
 * unchanged index: open, `changes(cursor)`, `close()` — loads only the
 * backend's front and what it uses; the log modules load at the first
 * operation on a log. Checked in a fresh process running the built package,
 * by the files its loader resolved (a resolve hook; counts, not timings): the
 * build bundles the package into the entry chunk `index.js` (the front) and
 * the lazy chunk `persistence.js` (the log side, loaded by the front's one
 * `import()`); the source modules each chunk holds are read from its source
 * map. The `list` mode shows the probe sees the log chunk when it loads (so
 * the first cases could fail).
 */
const here = dirname(fileURLToPath(import.meta.url))

beforeAll(() => {
  if (!existsSync(join(here, '..', 'dist', 'persistence.js')))
    throw new Error('Build first: npx turbo run build --filter=@dsh/session-persistence-jsonl...')
})

interface Probe {
  /** The package's dist files the process loaded. */
  readonly chunks: string[]
  /** The source modules those files hold (`create.ts` as `create.js`). */
  readonly modules: string[]
  readonly result: Record<string, unknown>
}

function probe(root: string, mode: 'open' | 'open-writable' | 'list', since?: string): Probe {
  const args = [join(here, 'workers', 'module-probe.mjs'), root, mode, ...(since === undefined ? [] : [since])]
  const out = execFileSync(process.execPath, args, { encoding: 'utf8', timeout: 120_000 })
  return JSON.parse(out.trim().split('\n').at(-1)!) as Probe
}

/** What opening, following the feed and closing need: the front, the root marker, the journal and their helpers (index.ts only re-exports). */
const FRONT = [
  'change-journal-compaction.js',
  'change-journal-reader.js',
  'change-journal.js',
  'create.js',
  'errors.js',
  'fs-io.js',
  'id-encoding.js',
  'journal-lock.js',
  'journal-records.js',
  'process-identity.js',
  'root-marker.js',
  'trailer.js',
]
/** The log side (a module added to it later loads with it). */
const LOG_MODULES = [
  'codec.js',
  'create-log.js',
  'feed.js',
  'fork-refs.js',
  'forks.js',
  'log-format.js',
  'log-reader.js',
  'log-scan.js',
  'log-units.js',
  'padded-tail.js',
  'persistence.js',
  'reads.js',
  'session-writer.js',
  'writer-lock.js',
  'writer.js',
  'writers.js',
  'zstd-frames.js',
]

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

async function populatedRoot(sessions: number): Promise<{ root: string; cursor: string }> {
  const { dir, cleanup } = tempDir('dsh-jsonl-modules-')
  cleanups.push(cleanup)
  const p = createJsonlPersistence({ root: dir })
  for (let i = 0; i < sessions; i++) await p.append(targetOf(`s-${i}`), eventsFrom(0, 3))
  const { cursor } = await p.changes()
  await p.close()
  return { root: dir, cursor }
}

describe('the log modules load on first use', () => {
  it('open, changes(cursor) and close() of an unchanged root load only the front', async () => {
    const { root, cursor } = await populatedRoot(6)
    const { chunks, modules, result } = probe(root, 'open', cursor)
    expect(result).toEqual({ changed: 0, rescan: false })
    expect(chunks).toEqual(['index.js'])
    expect(modules).toEqual(FRONT)
  })

  it('a writable open (its change journal opened) and a rescan load only the front too', async () => {
    const { root } = await populatedRoot(3)
    const { chunks, modules, result } = probe(root, 'open-writable')
    expect(result).toEqual({ changed: 0, rescan: true })
    expect(chunks).toEqual(['index.js'])
    expect(modules).toEqual(FRONT)
  })

  it('the first operation on a log loads the log modules (the probe sees them)', async () => {
    const { root, cursor } = await populatedRoot(4)
    const { chunks, modules, result } = probe(root, 'list', cursor)
    expect(result).toEqual({ changed: 0, rescan: false, listed: 4 })
    expect(chunks).toEqual(['index.js', 'persistence.js'])
    expect(modules).toEqual(expect.arrayContaining([...FRONT, ...LOG_MODULES]))
  })
})
