import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { isDshError } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { createHost, derivedPaths } from '../src/index.js'
import { createQueryHost } from '../src/query.js'
import { scratchDir } from './support.js'

// The query host is the base every host is composed on (store, persistence,
// query): it must answer exactly as a full host does, with the same root
// checks, and nothing more (no projections, cache, subagents or HTTP).

/** A fresh directory, removed when the current test finishes. */
const listTree = (dir: string): string[] => readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  return isDshError(error) ? error.code : String(error)
}

/** A root with a parent, a subagent child and a plain session, written by a full host (which also builds the index). */
async function populate(root: string): Promise<{ parent: string; child: string }> {
  const host = await createHost({ root })
  try {
    const parent = host.sessions.create({ cwd: '/work/a' })
    parent.append('user/message', { text: 'hello listing' })
    const child = host.subagents.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'help' })
    await child.done
    const other = host.sessions.create({ cwd: '/work/b' })
    other.append('user/message', { text: 'another session' })
    await host.sessions.flush(parent)
    await host.sessions.flush(other)
    return { parent: parent.id, child: child.id }
  } finally {
    await host.dispose()
  }
}

describe('createQueryHost', () => {
  it('answers listings, history and search exactly as a read-only full host, and creates nothing', async () => {
    const root = join(scratchDir('dsh-query-host-'), 'root')
    const { parent, child } = await populate(root)
    const before = listTree(root)
    const full = await createHost({ root, readOnly: true })
    const expected = {
      all: await full.query.listSessions({}),
      children: await full.query.listSessions({ parentSession: parent }),
      page: await full.query.listSessions({ limit: 1 }),
      history: await full.query.readHistory(parent, {}),
      sessionHits: await full.query.searchSessions?.({ text: 'listing' }),
      eventHits: await full.query.searchEvents?.({ text: 'listing' }),
    }
    await full.dispose()
    const host = await createQueryHost({ root, readOnly: true })
    try {
      expect(host.readOnly).toBe(true)
      expect(host.queryBackend).toBe('sqlite')
      expect(Object.keys(host).sort()).toEqual(['ctx', 'dispose', 'persistence', 'query', 'queryBackend', 'readOnly', 'root', 'sessions'])
      expect(host.ctx.get('sessionProjections')).toBeUndefined()
      expect(host.ctx.get('subagents')).toBeUndefined()
      expect(await host.query.listSessions({})).toEqual(expected.all)
      expect((await host.query.listSessions({ parentSession: parent })).records.map((r) => r.header.id)).toEqual([child])
      expect(await host.query.listSessions({ parentSession: parent })).toEqual(expected.children)
      expect(await host.query.listSessions({ limit: 1 })).toEqual(expected.page)
      expect(await host.query.readHistory(parent, {})).toEqual(expected.history)
      expect(expected.sessionHits?.hits.map((h) => h.record.header.id)).toEqual([parent])
      expect(await host.query.searchSessions?.({ text: 'listing' })).toEqual(expected.sessionHits)
      expect(await host.query.searchEvents?.({ text: 'listing' })).toEqual(expected.eventHits)
      expect(expected.all.records).toHaveLength(3)
    } finally {
      await host.dispose()
    }
    expect(listTree(root)).toEqual(before)
  })

  it('read-only without an index lists from the logs, refuses search with SESSION_QUERY_INDEX_UNAVAILABLE, and creates no index', async () => {
    const root = join(scratchDir('dsh-query-host-'), 'root')
    await populate(root)
    const index = derivedPaths(root).index
    for (const suffix of ['', '-wal', '-shm']) rmSync(index + suffix, { force: true })
    const host = await createQueryHost({ root, readOnly: true })
    try {
      expect(host.queryBackend).toBe('sqlite')
      expect((await host.query.listSessions({})).records).toHaveLength(3)
      await expect(host.query.searchEvents!({ text: 'anything' })).rejects.toMatchObject({ code: 'SESSION_QUERY_INDEX_UNAVAILABLE' })
    } finally {
      await host.dispose()
    }
    expect(existsSync(index)).toBe(false)
  })

  it('a writable query host over a new root builds the index and lists what a full host wrote after it', async () => {
    const root = join(scratchDir('dsh-query-host-'), 'root')
    const first = await createQueryHost({ root })
    try {
      expect(first.queryBackend).toBe('sqlite')
      expect((await first.query.listSessions({})).records).toEqual([])
    } finally {
      await first.dispose()
    }
    expect(existsSync(derivedPaths(root).index)).toBe(true)
    const { parent } = await populate(root)
    const again = await createQueryHost({ root, requireExisting: true })
    try {
      expect((await again.query.listSessions({})).records.map((r) => r.header.id)).toContain(parent)
    } finally {
      await again.dispose()
    }
  })

  it('same root checks and option errors as createHost, and nothing created', async () => {
    const dir = scratchDir('dsh-query-host-')
    writeFileSync(join(dir, 'notes.txt'), 'not sessions')
    const before = listTree(dir)
    expect(await codeOf(createQueryHost({ root: dir, readOnly: true }))).toBe('HOST_ROOT_INVALID')
    expect(await codeOf(createQueryHost({ root: join(dir, 'missing'), readOnly: true }))).toBe('HOST_ROOT_INVALID')
    expect(await codeOf(createQueryHost({ root: join(dir, 'notes.txt') }))).toBe('HOST_ROOT_INVALID')
    expect(await codeOf(createQueryHost({ root: '' }))).toBe('HOST_INVALID_OPTIONS')
    expect(await codeOf(createQueryHost({ root: dir, query: 'mongo' as 'memory' }))).toBe('HOST_INVALID_OPTIONS')
    expect(listTree(dir)).toEqual(before)
  })
})
