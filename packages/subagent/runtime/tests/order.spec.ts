import { compareSessionIds } from '@dsh/session'
import { afterEach, describe, expect, it } from 'vitest'
import { explainChildren } from '../src/index.js'
import { BACKENDS, openPlace, type Place } from './backends.js'

const places: Place[] = []
afterEach(async () => {
  for (const place of places.splice(0)) await place.close()
})

/**
 * Ids whose code point order and UTF-16 code unit order differ: U+FFFF sorts
 * after U+10000 by code units (a surrogate, D800, is below FFFF) and before
 * it by code points.
 */
const IDS = ['\u{10000}-astral', '\uffff-bmp', 'z-ascii', 'é-latin', '\u{1F600}-emoji', '\ud7ff-below-surrogates']
const CODE_POINT_ORDER = [...IDS].sort(compareSessionIds)

describe.each(BACKENDS)('the listing id order (%s)', (backend) => {
  it('breaks createdAt ties by code point (compareSessionIds), live and cold, with and without the cache', async () => {
    const place = await openPlace(backend)
    places.push(place)
    const h = await place.open()
    const parent = h.sessions.create({ id: 'parent', createdAt: 1_000 })
    // Created in code unit order, so neither creation nor insertion order gives the answer.
    for (const id of [...IDS].sort()) {
      const child = h.sessions.create({ id, origin: 'subagent', parentSession: parent.id, delegationDepth: 1, createdAt: 2_000 })
      child.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'p', label: id })
    }
    const late = h.sessions.create({ id: 'a-late', origin: 'subagent', parentSession: parent.id, delegationDepth: 1, createdAt: 3_000 })
    late.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'p' })
    expect(CODE_POINT_ORDER).not.toEqual([...IDS].sort())
    const expected = [...CODE_POINT_ORDER, 'a-late']
    expect((await h.runtime.listChildren(parent.id)).map((row) => row.id)).toEqual(expected)
    for (const id of [...IDS, 'a-late']) await h.sessions.dispose(id)
    await h.ctx.require('sessionProjectionCache').idle()
    expect((await h.runtime.listChildren(parent.id)).map((row) => row.id)).toEqual(expected)
    const bare = await explainChildren(
      { sessions: h.sessions, sessionProjections: h.projections, sessionQuery: h.ctx.require('sessionQuery') },
      parent.id,
    )
    expect(bare.map((entry) => [entry.row.id, entry.rung])).toEqual(expected.map((id) => [id, 3]))
    expect((await h.runtime.listDescendants(parent.id)).map((row) => row.id)).toEqual(expected)
  })
})
