import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { SessionPersistence } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { exportV0, v0LogPath } from '../src/index.js'
import { T0, tempDir } from './fixtures.js'

// exportV0 is all or nothing: sessions of a real JSONL root exported into
// real directories, with failures before, while and after logs are written.

let persistence: SessionPersistence

/** Sessions `a` (cwd /srv/x), `b` and `c` (no cwd), one short turn each. */
async function persist(store: SessionPersistence): Promise<void> {
  for (const [id, cwd] of [
    ['a', '/srv/x'],
    ['b', undefined],
    ['c', undefined],
  ] as const) {
    const header = {
      version: 1 as const,
      id: id as never,
      createdAt: T0,
      isSeeded: false,
      delegationDepth: 0,
      ...(cwd === undefined ? {} : { cwd }),
    }
    const events = [
      { type: 'turn/start', data: { turn: 1 } },
      { type: 'user/message', data: { text: `hello ${id}` } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ].map((e, seq) => ({ ...e, seq: seq as never, time: T0 + seq }))
    await store.append({ header, inheritedEventCount: 0 as never }, events)
  }
}

const pathOf = (to: string, id: 'a' | 'b' | 'c'): string => v0LogPath(to, id, id === 'a' ? '/srv/x' : undefined, 'zstd')

/** Every entry under `dir`, as paths relative to it (directories end in `/`). */
function tree(dir: string): string[] {
  const out: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const rel = join(entry.parentPath, entry.name).slice(dir.length + 1)
    out.push(entry.isDirectory() ? `${rel}/` : rel)
  }
  return out.sort()
}

/** `store` with `inspect` running `before(id)` first: another process acting while the export reads. */
function whileReading(store: SessionPersistence, before: (id: string) => void): SessionPersistence {
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'inspect')
        return (id: string, signal?: AbortSignal) => {
          before(id)
          return target.inspect(id as never, signal)
        }
      const value = Reflect.get(target, prop, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

beforeEach(async () => {
  persistence = createJsonlPersistence({ root: tempDir('dsh') })
  await persist(persistence)
})

afterEach(async () => {
  await persistence.close()
})

describe('exportV0 writes all sessions or nothing', () => {
  it('an unknown id writes nothing, into a new or an existing target, and the corrected retry succeeds', async () => {
    const parent = tempDir('parent')
    const to = join(parent, 'out')
    await expect(exportV0({ ids: ['a', 'nope'], persistence, to })).rejects.toMatchObject({
      code: 'IMPORT_V0_NOT_FOUND',
      details: { id: 'nope' },
    })
    expect(tree(parent)).toEqual([])

    mkdirSync(to)
    await expect(exportV0({ ids: ['a', 'b', 'nope'], persistence, to })).rejects.toMatchObject({ code: 'IMPORT_V0_NOT_FOUND' })
    expect(tree(to)).toEqual([])

    const done = await exportV0({ ids: ['a', 'b'], persistence, to })
    expect(done.sessions.map((s) => [s.id, s.path, s.events])).toEqual([
      ['a', pathOf(to, 'a'), 3],
      ['b', pathOf(to, 'b'), 3],
    ])
    // The logs and the directories they made, nothing else (no staging left over); files 0600, directories 0700.
    expect(tree(to)).toEqual(
      [
        pathOf(to, 'a'),
        dirname(pathOf(to, 'a')),
        dirname(dirname(pathOf(to, 'a'))),
        pathOf(to, 'b'),
        dirname(pathOf(to, 'b')),
        dirname(dirname(pathOf(to, 'b'))),
      ]
        .map((path) => path.slice(to.length + 1) + (path.endsWith('.zstd') ? '' : '/'))
        .sort(),
    )
    if (process.platform !== 'win32') {
      for (const id of ['a', 'b'] as const) {
        expect(statSync(pathOf(to, id)).mode & 0o777).toBe(0o600)
        expect(statSync(dirname(pathOf(to, id))).mode & 0o777).toBe(0o700)
      }
    }
  })

  it('a session named twice is IMPORT_V0_INVALID_OPTION before anything is written', async () => {
    const parent = tempDir('parent')
    const to = join(parent, 'out')
    await expect(exportV0({ ids: ['a', 'b', 'a'], persistence, to })).rejects.toMatchObject({
      code: 'IMPORT_V0_INVALID_OPTION',
      message: expect.stringContaining('"a" is named more than once'),
      details: { id: 'a', reason: 'duplicate-id' },
    })
    expect(tree(parent)).toEqual([])
    expect((await exportV0({ ids: ['a', 'b'], persistence, to })).sessions).toHaveLength(2)
  })

  it('an id whose v0 directory name would pass 255 bytes is IMPORT_V0_INVALID_ID before anything is written; a long cwd is cut to fit', async () => {
    const long = { ascii: 'y'.repeat(300), accented: 'é'.repeat(52), fits: 'é'.repeat(51) }
    for (const id of Object.values(long)) {
      const header = {
        version: 1 as const,
        id: id as never,
        createdAt: T0,
        isSeeded: false,
        delegationDepth: 0,
        cwd: `/${'d'.repeat(400)}`,
      }
      await persistence.append({ header, inheritedEventCount: 0 as never }, [
        { type: 'turn/start', seq: 0 as never, time: T0, data: { turn: 1 } },
      ])
    }
    const parent = tempDir('parent')
    const to = join(parent, 'out')
    for (const [id, bytes] of [
      [long.ascii, 300],
      [long.accented, 260],
    ] as const) {
      await expect(exportV0({ ids: ['a', id], persistence, to })).rejects.toMatchObject({
        code: 'IMPORT_V0_INVALID_ID',
        message: expect.stringContaining(`would be ${bytes} bytes`),
        details: { id, bytes, max: 255, reason: 'too-long' },
      })
      expect(tree(parent)).toEqual([])
    }
    // 51 characters escaped as '~XXXX' are exactly 255 bytes, under a project key cut to 255 bytes too.
    const done = await exportV0({ ids: [long.fits], persistence, to })
    expect(
      done.sessions.map((s) =>
        s.path
          .slice(to.length + 1)
          .split('/')
          .map((segment) => segment.length),
      ),
    ).toEqual([[255, 255, 18]])
  })

  it('a log already in the target refuses the export and leaves the sessions read before it unwritten', async () => {
    const to = tempDir('out')
    mkdirSync(dirname(pathOf(to, 'b')), { recursive: true })
    writeFileSync(pathOf(to, 'b'), 'not ours')
    await expect(exportV0({ ids: ['a', 'b', 'c'], persistence, to })).rejects.toMatchObject({
      code: 'IMPORT_V0_EXPORT_EXISTS',
      details: { path: pathOf(to, 'b') },
    })
    expect(existsSync(pathOf(to, 'a'))).toBe(false)
    expect(tree(to)).toEqual(['_no-cwd/', `${dirname(pathOf(to, 'b')).slice(to.length + 1)}/`, pathOf(to, 'b').slice(to.length + 1)])
    expect(readFileSync(pathOf(to, 'b'), 'utf8')).toBe('not ours')
  })

  it('a log that appears in the target while the export reads removes the logs it already placed, never the other log', async () => {
    const parent = tempDir('parent')
    const to = join(parent, 'out')
    // Once `b` was checked free and `c` is being read, another writer takes `b`'s path.
    const racing = whileReading(persistence, (id) => {
      if (id !== 'c') return
      mkdirSync(dirname(pathOf(to, 'b')), { recursive: true })
      writeFileSync(pathOf(to, 'b'), 'not ours')
    })
    await expect(exportV0({ ids: ['a', 'b', 'c'], persistence: racing, to })).rejects.toMatchObject({
      code: 'IMPORT_V0_EXPORT_EXISTS',
      details: { path: pathOf(to, 'b') },
    })
    expect(tree(to)).toEqual(['_no-cwd/', `${dirname(pathOf(to, 'b')).slice(to.length + 1)}/`, pathOf(to, 'b').slice(to.length + 1)])
    expect(readFileSync(pathOf(to, 'b'), 'utf8')).toBe('not ours')
  })

  it('a cancelled export removes the target it created', async () => {
    const parent = tempDir('parent')
    const to = join(parent, 'out')
    const controller = new AbortController()
    const cancelling = whileReading(persistence, (id) => {
      if (id === 'b') controller.abort()
    })
    await expect(exportV0({ ids: ['a', 'b', 'c'], persistence: cancelling, to, signal: controller.signal })).rejects.toThrow()
    expect(tree(parent)).toEqual([])
  })

  it('a target that is a file is IMPORT_V0_INVALID_OPTION and stays as it was', async () => {
    const parent = tempDir('parent')
    const to = join(parent, 'out')
    writeFileSync(to, 'a file')
    await expect(exportV0({ ids: ['a'], persistence, to })).rejects.toMatchObject({
      code: 'IMPORT_V0_INVALID_OPTION',
      details: { reason: 'not-a-directory' },
    })
    expect(readFileSync(to, 'utf8')).toBe('a file')
  })

  it('a project or session directory of the target that is a symlink is refused, nothing written through it or into the target', async () => {
    for (const link of ['project', 'session'] as const) {
      const to = tempDir('to')
      const outside = tempDir('outside')
      const linkPath = link === 'project' ? dirname(dirname(pathOf(to, 'a'))) : dirname(pathOf(to, 'a'))
      mkdirSync(dirname(linkPath), { recursive: true })
      symlinkSync(outside, linkPath)
      const before = tree(to)
      await expect(exportV0({ ids: ['b', 'a'], persistence, to })).rejects.toMatchObject({
        code: 'IMPORT_V0_INVALID_OPTION',
        details: { reason: 'not-a-directory', path: linkPath },
      })
      expect(readdirSync(outside)).toEqual([])
      expect(tree(to)).toEqual(before)
    }
  })
})
