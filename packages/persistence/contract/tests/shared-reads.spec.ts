import { randomUUID } from 'node:crypto'
import { parseSessionHeader, SessionId, SessionLogOffset, SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import {
  type AppendTarget,
  createMemoryPersistence,
  MemoryPersistenceStorage,
  type SessionPersistence,
  withSharedReads,
} from '../src/index.js'
import { describePersistenceContract } from '../src/testing/index.js'
import { deferred, FaultyPersistence, memoryFaults } from './support.js'

function target(id: string, createdAt = 1_700_000_000_000): AppendTarget {
  return {
    header: parseSessionHeader({ version: 1, id, createdAt, isSeeded: false, delegationDepth: 0 }),
    inheritedEventCount: SessionLogOffset(0),
  }
}

function events(from: number, count: number): StoredSessionEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    type: 'user/message',
    seq: SessionSeq(from + i),
    time: from + i,
    data: { text: `m${from + i}` },
  }))
}

function setup(lruSize?: number) {
  const storage = new MemoryPersistenceStorage()
  const faulty = new FaultyPersistence(createMemoryPersistence({ storage }))
  const shared = withSharedReads(faulty, lruSize === undefined ? {} : { lruSize })
  return { storage, faulty, shared }
}

const id = SessionId('s')

describe('shared in-flight reads', () => {
  it('concurrent inspections of one id share one physical read', async () => {
    const { faulty, shared } = setup()
    await shared.append(target('s'), events(0, 50))
    const gate = deferred()
    faulty.inspectGate = gate.promise
    const before = shared.metrics.bodyReads
    const pending = Array.from({ length: 5 }, () => shared.inspect(id))
    gate.resolve()
    const observations = await Promise.all(pending)
    expect(shared.metrics.bodyReads - before).toBe(1)
    expect(new Set(observations).size).toBe(1)
    expect(observations[0]!.events).toHaveLength(50)
    expect(shared.sharedReads).toMatchObject({ joined: 4, misses: 1 })
  })

  it('different ids are read separately', async () => {
    const { shared } = setup()
    await shared.append(target('a'), events(0, 1))
    await shared.append(target('b'), events(0, 2))
    const before = shared.metrics.bodyReads
    const [a, b] = await Promise.all([shared.inspect(SessionId('a')), shared.inspect(SessionId('b'))])
    expect(shared.metrics.bodyReads - before).toBe(2)
    expect([a.events.length, b.events.length]).toEqual([1, 2])
  })

  it('a read issued after an append resolved never joins a read that started before it', async () => {
    const { faulty, shared } = setup(0)
    await shared.append(target('s'), events(0, 1))
    const gate = deferred()
    faulty.inspectGate = gate.promise
    const early = shared.inspect(id)
    await shared.append(target('s'), events(1, 1))
    const late = shared.inspect(id)
    gate.resolve()
    expect((await late).events).toHaveLength(2)
    // The early read took its snapshot before the append.
    expect((await early).events).toHaveLength(1)
  })

  it('one caller aborting does not cancel the read for the others', async () => {
    const { faulty, shared } = setup()
    await shared.append(target('s'), events(0, 3))
    const gate = deferred()
    faulty.inspectGate = gate.promise
    const controller = new AbortController()
    const before = shared.metrics.bodyReads
    const aborted = shared.inspect(id, controller.signal)
    const other = shared.inspect(id)
    controller.abort()
    await expect(aborted).rejects.toMatchObject({ code: 'CANCELLED' })
    gate.resolve()
    expect((await other).events).toHaveLength(3)
    expect(shared.metrics.bodyReads - before).toBe(1)
  })

  it('shares a failure between concurrent callers and does not remember it', async () => {
    const { faulty, shared } = setup()
    const gate = deferred()
    faulty.inspectGate = gate.promise
    const both = [shared.inspect(id), shared.inspect(id)]
    gate.resolve()
    faulty.inspectGate = undefined
    for (const pending of both) await expect(pending).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_NOT_FOUND' })
    expect(shared.sharedReads.joined).toBe(1)
    await shared.append(target('s'), events(0, 1))
    expect((await shared.inspect(id)).events).toHaveLength(1)
  })
})

describe('the observation LRU', () => {
  it('reuses an observation while its revision is current, with no body read', async () => {
    const { shared } = setup()
    await shared.append(target('s'), events(0, 10))
    const first = await shared.inspect(id)
    const reads = shared.metrics.bodyReads
    const second = await shared.inspect(id)
    expect(second).toBe(first)
    expect(shared.metrics.bodyReads).toBe(reads)
    expect(shared.sharedReads.lruHits).toBe(1)
  })

  it('never serves a stale revision after an append through the wrapper', async () => {
    const { shared } = setup()
    await shared.append(target('s'), events(0, 1))
    const first = await shared.inspect(id)
    await shared.append(target('s'), events(1, 1))
    const second = await shared.inspect(id)
    expect(second.events).toHaveLength(2)
    expect(second.revision).not.toBe(first.revision)
  })

  it('never serves a stale revision after a write that bypassed the wrapper (another instance)', async () => {
    const { storage, shared } = setup()
    await shared.append(target('s'), events(0, 1))
    await shared.inspect(id)
    const otherProcess = createMemoryPersistence({ storage })
    await otherProcess.append(target('s'), events(1, 2))
    expect((await shared.inspect(id)).events).toHaveLength(3)
    // Deleted and re-created as another lifecycle elsewhere: still not stale.
    await otherProcess.delete(id)
    await otherProcess.append(target('s', 42), events(0, 3))
    const reborn = await shared.inspect(id)
    expect(reborn.header.createdAt).toBe(42)
    expect(reborn.events.map((e) => e.data)).toEqual([{ text: 'm0' }, { text: 'm1' }, { text: 'm2' }])
    await otherProcess.delete(id)
    await expect(shared.inspect(id)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_NOT_FOUND' })
  })

  it('forgets a deleted session', async () => {
    const { shared } = setup()
    await shared.append(target('s'), events(0, 1))
    await shared.inspect(id)
    expect(await shared.delete(id)).toBe(true)
    await expect(shared.inspect(id)).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_NOT_FOUND' })
  })

  it('keeps only the lruSize most recently used sessions', async () => {
    const { shared } = setup(2)
    for (const name of ['a', 'b', 'c']) await shared.append(target(name), events(0, 1))
    const read = async (name: string): Promise<number> => {
      const before = shared.metrics.bodyReads
      await shared.inspect(SessionId(name))
      return shared.metrics.bodyReads - before
    }
    expect(await read('a')).toBe(1)
    expect(await read('b')).toBe(1)
    expect(await read('a')).toBe(0)
    expect(await read('c')).toBe(1) // evicts b, the least recently used
    expect(await read('a')).toBe(0)
    expect(await read('b')).toBe(1)
  })

  it('lruSize 0 reads every time', async () => {
    const { shared } = setup(0)
    await shared.append(target('s'), events(0, 1))
    await shared.inspect(id)
    await shared.inspect(id)
    expect(shared.sharedReads).toMatchObject({ lruHits: 0, misses: 2 })
    expect(() => withSharedReads(createMemoryPersistence(), { lruSize: -1 })).toThrow(
      expect.objectContaining({ code: 'SESSION_PERSISTENCE_INVALID_OPTION' }),
    )
  })

  it('a load (with its crash repair) seeds the LRU with the repaired log', async () => {
    const { shared } = setup()
    await shared.append(target('s'), [{ type: 'turn/start', seq: SessionSeq(0), time: 1, data: { turn: 1 } }])
    await shared.inspect(id)
    const loaded = await shared.load(id)
    expect(loaded.repaired).toBe(true)
    const reads = shared.metrics.bodyReads
    const observation = await shared.inspect(id)
    expect(shared.metrics.bodyReads).toBe(reads)
    expect(observation.revision).toBe(loaded.revision)
    expect(observation.events.map((e) => e.type)).toEqual(['turn/start', 'turn/end'])
  })
})

// The wrapper is a backend too: with the LRU off it keeps the whole contract,
// including one physical body read per sequential inspection.
const storages = new Map<string, MemoryPersistenceStorage>()
describePersistenceContract('memory behind withSharedReads', (options) => {
  const owned = options?.root === undefined
  const root = options?.root ?? randomUUID()
  let storage = storages.get(root)
  if (storage === undefined) {
    storage = new MemoryPersistenceStorage()
    storages.set(root, storage)
  }
  const open = (): SessionPersistence => withSharedReads(createMemoryPersistence({ storage }), { lruSize: 0 })
  const instances = [open()]
  return {
    ...memoryFaults(storage),
    persistence: instances[0]!,
    root,
    async reopen() {
      await instances.at(-1)!.close()
      instances.push(open())
      return instances.at(-1)!
    },
    async cleanup() {
      for (const instance of instances) await instance.close()
      if (owned) storages.delete(root)
    },
  }
})
