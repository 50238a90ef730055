import type { Session } from '@dsh/session'
import type { SessionListFilter, SessionQuery } from '@dsh/session-query'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { explainDescendants, listChildren, SUBAGENT_IDENTITY_KEY, type SubagentCatalogServices, treeSnapshots } from '../src/index.js'
import { openPlace, type Place } from './backends.js'
import type { Host } from './helpers.js'

/**
 * What a listing asks of the query backend, counted through a wrapper around
 * the real backend: the calls, their filters and every record returned. The
 * store holds 1,000 subagents of other parents; a listing of a parent with 20
 * children must read that family only.
 */

const OTHER_PARENTS = 50
const CHILDREN_EACH = 20

interface Counted {
  readonly filters: SessionListFilter[]
  records: number
  wrap(query: SessionQuery): SessionQuery
}

function counted(): Counted {
  const c: Counted = {
    filters: [],
    records: 0,
    // Each method delegates explicitly: a backend's methods may live on its prototype, which a spread leaves behind.
    wrap: (query) => ({
      observeSession: (id, signal) => query.observeSession(id, signal),
      readHistory: (id, request, signal) => query.readHistory(id, request, signal),
      readWindow: (id, request, signal) => query.readWindow(id, request, signal),
      async listSessions(filter, signal) {
        c.filters.push(filter ?? {})
        const page = await query.listSessions(filter, signal)
        c.records += page.records.length
        return page
      },
    }),
  }
  return c
}

function spawnCold(h: Host, parent: Session): Session {
  const child = h.sessions.create({ origin: 'subagent', parentSession: parent.id, delegationDepth: parent.header.delegationDepth + 1 })
  child.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'scripted' })
  return child
}

for (const name of ['memory', 'jsonl'] as const) {
  describe(`listing cost follows the family, not the store (${name}: ${name === 'jsonl' ? 'SQLite index' : 'in-memory query'})`, () => {
    let place: Place
    let h: Host
    let parent: Session
    let children: string[]
    let withChildren: Set<string>
    beforeAll(async () => {
      place = await openPlace(name)
      h = await place.open({ cache: false })
      for (let p = 0; p < OTHER_PARENTS; p++) {
        const other = h.sessions.create()
        for (let i = 0; i < CHILDREN_EACH; i++) await h.sessions.dispose(spawnCold(h, other).id)
        await h.sessions.dispose(other.id)
      }
      parent = h.sessions.create()
      const made = Array.from({ length: 20 }, () => spawnCold(h, parent))
      children = made.map((c) => c.id)
      // Three children have a child of their own; the first of those one more generation below.
      const grandchildren = made.slice(2, 5).map((c) => spawnCold(h, c))
      await h.sessions.dispose(spawnCold(h, grandchildren[0]!).id)
      for (const g of grandchildren) await h.sessions.dispose(g.id)
      for (const c of made) await h.sessions.dispose(c.id)
      withChildren = new Set(children.slice(2, 5))
      // Bounded by counts (1,075 sessions written); the timeout only guards a hang.
    }, 600_000)
    afterAll(async () => {
      await place.close()
    })

    function services(c: Counted): SubagentCatalogServices {
      return {
        sessions: h.sessions,
        sessionProjections: h.projections,
        sessionQuery: c.wrap(h.ctx.require('sessionQuery') as SessionQuery),
      }
    }

    it('the store holds the 1,000 unrelated subagents', async () => {
      const query = h.ctx.require('sessionQuery') as SessionQuery
      expect((await query.listSessions({ origin: 'subagent' })).records.length).toBe(OTHER_PARENTS * CHILDREN_EACH + 20 + 3 + 1)
    })

    it('listChildren of a parent with 20 children: two listings, 23 records (its children and theirs)', async () => {
      const c = counted()
      const rows = await listChildren(services(c), parent.id)
      expect(rows.map((r) => r.id).sort()).toEqual([...children].sort())
      expect(rows.every((r) => r.kind === 'child')).toBe(true)
      expect(rows.map((r) => r.kind === 'child' && r.hasChildren)).toEqual(rows.map((r) => withChildren.has(r.id)))
      expect(c.filters).toEqual([
        { parentSession: parent.id, origin: 'subagent', limit: 1000 },
        { parentSessions: expect.arrayContaining(children), origin: 'subagent', limit: 1000 },
      ])
      expect(c.records).toBe(20 + 3)
    })

    it('listDescendants: one listing per generation, one record per member of the family', async () => {
      const c = counted()
      const entries = await explainDescendants(services(c), parent.id)
      expect(entries).toHaveLength(24)
      expect(entries.map((e) => e.depth).filter((d) => d > 1)).toEqual([2, 3, 2, 2])
      // Generations: the children, the grandchildren, one great-grandchild, and the empty one below it.
      expect(c.filters).toHaveLength(4)
      expect(c.records).toBe(24)
    })

    it('treeSnapshots: a cold root by one lookup of its row, then one listing per generation; a live root needs no lookup', async () => {
      // children[2] is cold, with a child of its own and a grandchild below that.
      const cold = counted()
      const entries = await treeSnapshots(services(cold), children[2]!, [SUBAGENT_IDENTITY_KEY], { descendants: true })
      expect(entries.map((e) => e.depth)).toEqual([0, 1, 2])
      expect(entries[0]!.id).toBe(children[2])
      expect(cold.filters[0]).toEqual({ ids: [children[2]], limit: 1000 })
      expect(cold.filters.slice(1).map((f) => f.parentSessions)).toEqual([[children[2]], [entries[1]!.id], [entries[2]!.id]])
      expect(cold.records).toBe(3)

      const alone = counted()
      expect((await treeSnapshots(services(alone), children[2]!, [SUBAGENT_IDENTITY_KEY])).map((e) => e.id)).toEqual([children[2]])
      expect(alone.filters).toEqual([{ ids: [children[2]], limit: 1000 }])
      expect(alone.records).toBe(1)

      const live = counted()
      const tree = await treeSnapshots(services(live), parent.id, [SUBAGENT_IDENTITY_KEY], { descendants: true })
      expect(tree).toHaveLength(1 + 24)
      expect(live.filters.every((f) => f.parentSessions !== undefined)).toBe(true)
      expect(live.filters).toHaveLength(4)
      expect(live.records).toBe(24)

      // maxDepth 1: the parent and its 20 children, from one listing; nothing below them is listed or read.
      const shallow = counted()
      const children1 = await treeSnapshots(services(shallow), parent.id, [SUBAGENT_IDENTITY_KEY], { descendants: true, maxDepth: 1 })
      expect(children1.map((e) => e.depth)).toEqual([0, ...children.map(() => 1)])
      expect(
        children1
          .slice(1)
          .map((e) => e.id)
          .sort(),
      ).toEqual([...children].sort())
      expect(shallow.filters).toEqual([{ parentSessions: [parent.id], limit: 1000 }])
      expect(shallow.records).toBe(20)
      const two = await treeSnapshots(services(counted()), parent.id, [SUBAGENT_IDENTITY_KEY], { descendants: true, maxDepth: 2 })
      expect(two.map((e) => e.depth).filter((d) => d > 1)).toEqual([2, 2, 2])
      for (const maxDepth of [0, -1, 1.5, Number.NaN])
        await expect(
          treeSnapshots(services(counted()), parent.id, [SUBAGENT_IDENTITY_KEY], { descendants: true, maxDepth }),
        ).rejects.toMatchObject({ code: 'SUBAGENT_INVALID_OPTIONS' })
    })
  })
}
