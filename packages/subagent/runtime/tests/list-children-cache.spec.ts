import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Session, StoredSessionEvent } from '@dsh/session'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import type { SessionProjectionUnit } from '@dsh/session-projection'
import { type SqliteProjectionCache, sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { beforeEach, describe, expect, it } from 'vitest'
import { createScriptedDriver, type SubagentIdentityState, subagentIdentityUnit } from '../src/index.js'
import { bodyReads, completedTurn, gate, type Host, type HostOptions, hostsPerTest, queryProbe } from './helpers.js'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-subagent-cache-'))
})
const hosts = hostsPerTest(() => rmSync(dir, { recursive: true, force: true }))

const quietThrottle = { events: 100_000, ms: 600_000 }

/** A host with the real SQLite checkpoint cache at `path` (default: one file per test). */
async function host(options: HostOptions & { cachePath?: string | false; before?: HostOptions['extra'] } = {}): Promise<Host> {
  const { cachePath = join(dir, 'projections.sqlite'), before, ...rest } = options
  const h = await hosts.open({
    ...rest,
    extra: async (ctx) => {
      await before?.(ctx)
      if (cachePath !== false) await ctx.activate(sessionProjectionCachePlugin({ path: cachePath, throttle: quietThrottle }))
    },
  })
  return h
}

function cacheOf(h: Host): SqliteProjectionCache {
  return h.ctx.require('sessionProjectionCache') as SqliteProjectionCache
}

const descriptor = (mode: 'one-shot' | 'continuable', label?: string) => ({
  version: 2,
  mode,
  provider: 'scripted',
  ...(label === undefined ? {} : { label }),
})

/** Builds a family in one process and returns a second process (same storage and cache file) where all of it is cold. */
async function coldWorld(
  build: (h: Host) => Promise<Record<string, string>>,
  reopen: Parameters<typeof host>[0] = {},
): Promise<{ cold: Host; ids: Record<string, string> }> {
  const storage = new MemoryPersistenceStorage()
  const writer = await host({ storage })
  const ids = await build(writer)
  await cacheOf(writer).idle()
  await hosts.close(writer)
  return { cold: await host({ storage, ...reopen }), ids }
}

describe('listChildren: the checkpoint cache rung', () => {
  it('serves an unseeded cold child from the cache at cut zero with zero body reads', async () => {
    const probe = queryProbe()
    const { cold, ids } = await coldWorld(
      async (h) => {
        const parent = h.sessions.create()
        const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
        await child.done
        return { parent: parent.id, child: child.id }
      },
      { query: probe.wrap },
    )
    const reads = bodyReads(cold)
    expect(await cold.runtime.explainChildren(ids.parent!)).toEqual([
      {
        row: { kind: 'child', id: ids.child, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'helper' },
        rung: 2,
        parentId: ids.parent,
        depth: 1,
        // No stats unit in this host: tokens unknown. Its timing comes from the cache as well.
        tokens: null,
        durationMs: expect.any(Number),
        startedAt: expect.any(Number),
        endedAt: expect.any(Number),
        closed: false,
      },
    ])
    expect(bodyReads(cold) - reads).toBe(0)
    expect(probe.calls.observeSession).toBe(0)
    // One lookup: the identity row and the timing row together.
    expect(cacheOf(cold).metrics.hits).toBe(1)
  })

  it('serves a closed cold child as closed from the same cache lookup, with zero body reads', async () => {
    const probe = queryProbe()
    const { cold, ids } = await coldWorld(
      async (h) => {
        const parent = h.sessions.create()
        const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh' })
        await child.done
        await h.runtime.close(child.id, { caller: parent })
        return { parent: parent.id, child: child.id }
      },
      { query: probe.wrap },
    )
    const reads = bodyReads(cold)
    expect(await cold.runtime.explainChildren(ids.parent!)).toMatchObject([
      { row: { kind: 'child', id: ids.child, activity: 'inactive', mode: 'continuable' }, rung: 2, closed: true },
    ])
    expect(bodyReads(cold) - reads).toBe(0)
    expect(probe.calls.observeSession).toBe(0)
    expect(cacheOf(cold).metrics.hits).toBe(1)
  })

  it('serves a seeded cold child from the cache at its exact cut (listing records carry it)', async () => {
    const probe = queryProbe()
    const { cold, ids } = await coldWorld(
      async (h) => {
        const parent = h.sessions.create()
        completedTurn(parent, 1)
        completedTurn(parent, 2)
        const child = h.runtime.spawn(parent, { mode: 'one-shot', label: 'forked', context: 'fork' })
        await child.done
        return { parent: parent.id, child: child.id }
      },
      { query: probe.wrap },
    )
    const explained = await cold.runtime.explainChildren(ids.parent!)
    expect(explained.map((e) => [e.rung, e.row])).toEqual([
      [2, { kind: 'child', id: ids.child, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'forked' }],
    ])
    expect(probe.calls.observeSession).toBe(0)
  })

  it('never serves an ancestor identity from a seeded child checkpoint: the seq gate sends it to the authoritative read', async () => {
    const probe = queryProbe()
    const { cold, ids } = await coldWorld(
      async (h) => {
        const top = h.sessions.create()
        const parent = h.sessions.create({ origin: 'subagent', parentSession: top.id, delegationDepth: 1 })
        parent.append('subagent/descriptor', descriptor('continuable', 'ancestor'))
        completedTurn(parent, 1)
        // A seeded child that never wrote its own descriptor: its checkpoint holds the ancestor's identity.
        const heir = h.sessions.fork(parent, { origin: 'subagent', delegationDepth: 2 })
        completedTurn(heir, 2)
        await h.sessions.dispose(heir.id)
        return { parent: parent.id, heir: heir.id }
      },
      { query: probe.wrap },
    )
    const explained = await cold.runtime.explainChildren(ids.parent!)
    expect(explained).toEqual([
      {
        row: { kind: 'diagnostic', id: ids.heir, reason: 'corrupt' },
        rung: 3,
        parentId: ids.parent,
        depth: 1,
        tokens: null,
        durationMs: null,
        startedAt: null,
        endedAt: null,
        closed: null,
      },
    ])
    expect(JSON.stringify(explained)).not.toContain('ancestor')
    expect(probe.calls.observeSession).toBe(1)
    // The cache did hold a row (a hit), it just cannot prove the identity is the child's own.
    expect(cacheOf(cold).metrics.hits).toBe(1)
  })

  it('falls through a cached null sentinel to the refold, which reports the settled child corrupt', async () => {
    const { cold, ids } = await coldWorld(async (h) => {
      const parent = h.sessions.create()
      const child = h.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
      child.append('subagent/descriptor', { version: 9, mode: 'one-shot', provider: 'p' })
      completedTurn(child, 1)
      await h.sessions.dispose(child.id)
      return { parent: parent.id, child: child.id }
    })
    const explained = await cold.runtime.explainChildren(ids.parent!)
    expect(explained.map((e) => [e.rung, e.row])).toEqual([[3, { kind: 'diagnostic', id: ids.child, reason: 'corrupt' }]])
  })

  it('falls through a poisoned cache row silently to the authoritative refold', async () => {
    // Another build wrote 'subagent' rows the real unit's schema rejects.
    const rogue: SessionProjectionUnit<'subagent'> = {
      ...subagentIdentityUnit,
      apply: (state: SubagentIdentityState, event: StoredSessionEvent) =>
        event.type === 'subagent/descriptor' ? ({ identity: { mode: 'telepathic', seq: 'x' } } as never) : state,
    }
    const storage = new MemoryPersistenceStorage()
    const writer = await host({ storage, before: async (ctx) => void ctx.require('sessionProjections').register(rogue) })
    const parent = writer.sessions.create()
    const child = writer.runtime.spawn(parent, { mode: 'one-shot', label: 'healthy', context: 'fresh' })
    await child.done
    await cacheOf(writer).idle()
    await hosts.close(writer)

    const cold = await host({ storage })
    const { header } = (await cold.persistence!.list()).find((r) => r.header.id === child.id)!
    expect(() => cacheOf(cold).cachedSnapshot(header, 0 as never, ['subagent'])).toThrow(
      expect.objectContaining({ code: 'SESSION_PROJECTION_CACHE_POISONED' }),
    )
    const reads = bodyReads(cold)
    const explained = await cold.runtime.explainChildren(parent.id)
    expect(explained.map((e) => [e.rung, e.row])).toEqual([
      [3, { kind: 'child', id: child.id, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'healthy' }],
    ])
    expect(bodyReads(cold) - reads).toBe(1)
    expect(cold.errors).toEqual([])
  })

  it('reads through to rung 3 without error when the cache file was deleted or destroyed', async () => {
    const storage = new MemoryPersistenceStorage()
    const cachePath = join(dir, 'doomed.sqlite')
    const writer = await host({ storage, cachePath })
    const parent = writer.sessions.create()
    const child = writer.runtime.spawn(parent, { mode: 'one-shot', label: 'x', context: 'fresh' })
    await child.done
    await hosts.close(writer)

    rmSync(cachePath, { force: true })
    const afterDelete = await host({ storage, cachePath })
    expect((await afterDelete.runtime.explainChildren(parent.id)).map((e) => e.rung)).toEqual([3])
    await hosts.close(afterDelete)

    writeFileSync(cachePath, 'this is not a database')
    const afterGarbage = await host({ storage, cachePath })
    const rows = await afterGarbage.runtime.listChildren(parent.id)
    expect(rows).toEqual([{ kind: 'child', id: child.id, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'x' }])
    expect(afterGarbage.errors).toEqual([])

    const unmounted = await host({ storage, cachePath: false })
    expect(await unmounted.runtime.listChildren(parent.id)).toEqual(rows)
    expect(unmounted.errors).toEqual([])
  })

  it('misses for a republished id: the checkpoint of the old lifecycle is never served for the new one', async () => {
    const storage = new MemoryPersistenceStorage()
    const writer = await host({ storage })
    const parent = writer.sessions.create()
    const old = writer.runtime.spawn(parent, { mode: 'continuable', label: 'old-owner', context: 'fresh', id: 'reused' })
    await old.done
    await hosts.close(writer)
    // Another process (without the cache) deletes the id and republishes it for the same parent, with no descriptor.
    const republisher = await host({ storage, cachePath: false })
    await republisher.persistence!.delete('reused' as never)
    const reborn = republisher.sessions.create({
      id: 'reused',
      origin: 'subagent',
      parentSession: parent.id,
      delegationDepth: 1,
      cwd: '/elsewhere',
    })
    completedTurn(reborn, 1)
    await republisher.sessions.dispose(reborn.id)

    const cold = await host({ storage })
    const explained = await cold.runtime.explainChildren(parent.id)
    expect(explained.map((e) => [e.rung, e.row])).toEqual([[3, { kind: 'diagnostic', id: 'reused', reason: 'corrupt' }]])
    expect(JSON.stringify(explained)).not.toContain('old-owner')
    expect(cacheOf(cold).metrics.hits).toBe(0)
  })

  it('keeps serving a stale unseeded checkpoint inside the later-event window (recorded deviation)', async () => {
    const storage = new MemoryPersistenceStorage()
    const writer = await host({ storage })
    const parent = writer.sessions.create()
    const child: Session = writer.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: 1 })
    child.append('subagent/descriptor', descriptor('one-shot', 'first'))
    completedTurn(child, 1) // turn/end: a mandatory checkpoint lands with the first identity
    await cacheOf(writer).idle()
    // A second descriptor (a provider contract violation) becomes durable, then the process dies before any checkpoint.
    child.append('subagent/descriptor', descriptor('continuable', 'second'))
    await writer.sessions.flush(child)
    const crashed = writer
    hosts.abandon(writer)

    const cold = await host({ storage })
    expect((await cold.runtime.explainChildren(parent.id)).map((e) => [e.rung, e.row])).toEqual([
      [2, { kind: 'child', id: child.id, activity: 'inactive', hasChildren: false, mode: 'one-shot', label: 'first' }],
    ])
    // Without the cache the authoritative refold gives last-wins.
    const uncached = await host({ storage, cachePath: false })
    expect(await uncached.runtime.listChildren(parent.id)).toEqual([
      { kind: 'child', id: child.id, activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'second' },
    ])
    cacheOf(crashed).close()
  })
})

describe('listChildren: usage beside the identity', () => {
  // A unit under the key the catalog reads tokens from, with the view shape of `@dsh/session-stats`'s
  // (`tokens` by kind): this package does not depend on that one, and the catalog reads it by key.
  const usageUnit = {
    key: 'sessionStats',
    stateVersion: 1,
    init: () => ({ input: 0, output: 0 }),
    apply: (state: { input: number; output: number }, event: StoredSessionEvent) => {
      const usage = (event.data as { usage?: { input: number; output: number } }).usage
      return event.type === 'assistant/message' && usage !== undefined
        ? { input: state.input + usage.input, output: state.output + usage.output }
        : state
    },
    view: (state: { input: number; output: number }) => ({ tokens: state }),
    schema: { safeParse: (state: unknown) => ({ success: true as const, data: state }) },
  } as unknown as SessionProjectionUnit<'subagent'>
  const withUsageUnit: HostOptions['extra'] = async (ctx) => void ctx.require('sessionProjections').register(usageUnit)
  const spawnOne = async (h: Host) => {
    const parent = h.sessions.create()
    const child = h.runtime.spawn(parent, { mode: 'one-shot', label: 'counted', context: 'fresh', prompt: 'go' })
    await child.done
    return { parent: parent.id, child: child.id }
  }

  it('reads tokens and duration live, from the cache and from the one body read, and they agree', async () => {
    const storage = new MemoryPersistenceStorage()
    const hold = gate()
    const driver = createScriptedDriver([
      { kind: 'message', text: 'counted', usage: { input: 30, output: 12 } },
      { kind: 'until', promise: hold.promise },
    ])
    const writer = await host({ storage, driver, before: withUsageUnit })
    const parent = writer.sessions.create()
    const child = writer.runtime.spawn(parent, { mode: 'one-shot', label: 'counted', context: 'fresh', prompt: 'go' })
    await expect.poll(async () => (await writer.runtime.explainChildren(parent.id))[0]?.tokens, { timeout: 120_000 }).toBe(42)
    // Live and mid-turn: the open turn is not counted yet.
    expect((await writer.runtime.explainChildren(parent.id))[0]).toMatchObject({ rung: 1, tokens: 42, durationMs: 0 })
    hold.open()
    await child.done
    await cacheOf(writer).idle()
    await hosts.close(writer)
    const cached = (await (await host({ storage, before: withUsageUnit })).runtime.explainChildren(parent.id))[0]!
    expect(cached).toMatchObject({ rung: 2, tokens: 42, durationMs: expect.any(Number) })
    expect(cached.durationMs).toBeGreaterThan(0)
    // The child's span, as wall-clock times: from its descriptor to its last turn's end, the same on every rung.
    expect(cached.endedAt! - cached.startedAt!).toBeGreaterThanOrEqual(cached.durationMs!)
    const read = (await (await host({ storage, before: withUsageUnit, cachePath: false })).runtime.explainChildren(parent.id))[0]!
    expect(read).toMatchObject({ rung: 3, tokens: 42, durationMs: cached.durationMs, startedAt: cached.startedAt, endedAt: cached.endedAt })
  })

  it('leaves tokens unknown on a cache miss for their unit, without a body read, and on a host without the unit', async () => {
    // Written by a host without the usage unit: the cache has the identity and timing rows, not the usage one.
    const { cold, ids } = await coldWorld(spawnOne, { before: withUsageUnit })
    const reads = bodyReads(cold)
    const hits = cacheOf(cold).metrics.hits
    expect((await cold.runtime.explainChildren(ids.parent!))[0]).toMatchObject({ rung: 2, tokens: null, durationMs: expect.any(Number) })
    expect(bodyReads(cold) - reads).toBe(0)
    // The lookup of all three rows missed; the identity and the timing were then looked up on their own.
    expect(cacheOf(cold).metrics.hits - hits).toBe(2)
    const { cold: plain, ids: plainIds } = await coldWorld(spawnOne)
    expect((await plain.runtime.explainChildren(plainIds.parent!))[0]).toMatchObject({ rung: 2, tokens: null })
  })
})
