import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Context, DshError } from '@dsh/context'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import { type SessionProjectionUnit, z } from '@dsh/session-projection'
import { type SqliteProjectionCache, sessionProjectionCachePlugin } from '@dsh/session-projection-cache'
import { beforeEach, describe, expect, it } from 'vitest'
import { bodyReads, codeOf, completedTurn, type Host, type HostOptions, hostsPerTest, queryProbe } from './helpers.js'

// A unit that counts the turns of a session's own suffix, as a usage unit would.
interface OwnTurns {
  readonly from: number
  readonly turns: number
}
declare module '@dsh/session-projection' {
  interface SessionProjectionStateMap {
    ownTurns: OwnTurns
  }
  interface SessionProjectionMap {
    ownTurns: OwnTurns
  }
}
const ownTurns: SessionProjectionUnit<'ownTurns'> = {
  key: 'ownTurns',
  stateVersion: 1,
  init: (context) => ({ from: context?.inheritedEventCount ?? 0, turns: 0 }),
  apply: (state, event) => (event.type === 'turn/start' && event.seq >= state.from ? { ...state, turns: state.turns + 1 } : state),
  view: (state) => state,
  schema: z.strictObject({ from: z.number().int().nonnegative(), turns: z.number().int().nonnegative() }),
}
const KEYS = ['ownTurns'] as const

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-tree-snapshots-'))
})
const hosts = hostsPerTest(() => rmSync(dir, { recursive: true, force: true }))

async function host(options: HostOptions & { cache?: boolean } = {}): Promise<Host> {
  const { cache = true, ...rest } = options
  const h = await hosts.open({
    ...rest,
    extra: async (ctx: Context) => {
      ctx.require('sessionProjections').register(ownTurns)
      if (cache) await ctx.activate(sessionProjectionCachePlugin({ path: join(dir, 'projections.sqlite') }))
    },
  })
  return h
}

/**
 * root (2 turns) ─┬─ a: subagent forked from root (1 own turn) ── a1: subagent (3 turns)
 *                 └─ p: plain fork of root (1 own turn) ── p1: subagent of the plain fork (2 turns)
 * Written by one process, read cold by another over the same storage.
 */
async function coldTree(reopen: HostOptions & { cache?: boolean } = {}): Promise<{ cold: Host; ids: Record<string, string> }> {
  const storage = new MemoryPersistenceStorage()
  const writer = await host({ storage })
  const { sessions } = writer
  const root = sessions.create()
  completedTurn(root, 1)
  completedTurn(root, 2)
  const a = sessions.fork(root, { origin: 'subagent', delegationDepth: 1 })
  completedTurn(a, 3)
  const a1 = sessions.create({ origin: 'subagent', parentSession: a.id, delegationDepth: 2 })
  for (const turn of [1, 2, 3]) completedTurn(a1, turn)
  const p = sessions.fork(root)
  completedTurn(p, 3)
  const p1 = sessions.create({ origin: 'subagent', parentSession: p.id, delegationDepth: 1 })
  completedTurn(p1, 1)
  completedTurn(p1, 2)
  const ids = { root: root.id, a: a.id, a1: a1.id, p: p.id, p1: p1.id }
  await (writer.ctx.get('sessionProjectionCache') as SqliteProjectionCache | undefined)?.idle()
  await hosts.close(writer)
  return { cold: await host({ storage, ...reopen }), ids }
}

const turnsOf = (entries: Awaited<ReturnType<Host['runtime']['treeSnapshots']>>) =>
  entries.map((entry) => [entry.id, entry.depth, entry.status, entry.snapshot?.ownTurns?.turns])

describe('treeSnapshots: a session tree through the catalog ladder', () => {
  it('with a warm cache answers the whole cold tree from checkpoints: rung 2 everywhere, zero body reads', async () => {
    const probe = queryProbe()
    const { cold, ids } = await coldTree({ query: probe.wrap })
    const before = bodyReads(cold)
    const entries = await cold.runtime.treeSnapshots(ids.root!, KEYS, { descendants: true })
    expect(turnsOf(entries)).toEqual([
      [ids.root, 0, 'ok', 2],
      [ids.a, 1, 'ok', 1],
      [ids.a1, 2, 'ok', 3],
      [ids.p, 1, 'ok', 1],
      [ids.p1, 2, 'ok', 2],
    ])
    expect(entries.map((entry) => entry.rung)).toEqual([2, 2, 2, 2, 2])
    expect(entries.map((entry) => [entry.parentId, entry.subagent])).toEqual([
      [undefined, false],
      [ids.root, true],
      [ids.a, true],
      [ids.root, false],
      [ids.p, true],
    ])
    expect(bodyReads(cold) - before).toBe(0)
    expect(probe.calls.observeSession).toBe(0)
  })

  it('without a cache folds each cold session once (rung 3), forks counting only their own suffix', async () => {
    const probe = queryProbe()
    const { cold, ids } = await coldTree({ query: probe.wrap, cache: false })
    const entries = await cold.runtime.treeSnapshots(ids.root!, KEYS, { descendants: true })
    expect(turnsOf(entries).map(([, , , turns]) => turns)).toEqual([2, 1, 3, 1, 2])
    expect(entries.map((entry) => entry.rung)).toEqual([3, 3, 3, 3, 3])
    expect(probe.calls.observeSession).toBe(5)
  })

  it('answers a live session from its watermark (rung 1) and the root alone without descendants', async () => {
    const h = await host()
    const root = h.sessions.create()
    completedTurn(root, 1)
    const child = h.sessions.fork(root, { origin: 'subagent', delegationDepth: 1 })
    completedTurn(child, 2)
    expect(turnsOf(await h.runtime.treeSnapshots(root.id, KEYS))).toEqual([[root.id, 0, 'ok', 1]])
    const entries = await h.runtime.treeSnapshots(root.id, KEYS, { descendants: true })
    expect(turnsOf(entries)).toEqual([
      [root.id, 0, 'ok', 1],
      [child.id, 1, 'ok', 1],
    ])
    expect(entries.map((entry) => entry.rung)).toEqual([1, 1])
  })

  it('reports a child whose read fails as unavailable, and one with a damaged log or whose id names another lifecycle as corrupt, never dropping them', async () => {
    const probe = queryProbe()
    const { cold, ids } = await coldTree({ query: probe.wrap, cache: false })
    probe.beforeObserve = (id) => {
      if (id === ids.a1) throw new Error('disk went away')
      if (id === ids.p) throw new DshError('SESSION_QUERY_CORRUPT_SESSION', 'line 3 is damaged')
    }
    probe.mapObservation = (id, observation) =>
      id === ids.p1 ? { ...observation, header: { ...observation.header, createdAt: observation.header.createdAt + 1 } } : observation
    const entries = await cold.runtime.treeSnapshots(ids.root!, KEYS, { descendants: true })
    expect(entries.map((entry) => [entry.id, entry.status])).toEqual([
      [ids.root, 'ok'],
      [ids.a, 'ok'],
      [ids.a1, 'unavailable'],
      [ids.p, 'corrupt'],
      [ids.p1, 'corrupt'],
    ])
    expect(entries[2]?.problem).toEqual({ message: 'disk went away' })
    expect(entries[2]?.snapshot).toBeUndefined()
    expect(entries[3]?.problem).toEqual({ code: 'SESSION_QUERY_CORRUPT_SESSION', message: 'line 3 is damaged' })
  })

  it('fails with SUBAGENT_NOT_FOUND for an unknown root and PROJECTIONS_UNAVAILABLE for an unregistered key', async () => {
    const h = await host()
    const root = h.sessions.create()
    expect(await codeOf(h.runtime.treeSnapshots('no-such-session', KEYS))).toBe('SUBAGENT_NOT_FOUND')
    expect(await codeOf(() => h.runtime.treeSnapshots(root.id, ['nope' as never]))).toBe('SUBAGENT_CONTROL_PROJECTIONS_UNAVAILABLE')
  })
})
