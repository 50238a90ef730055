import {
  EVENT_MAX_BYTES as SESSION_EVENT_MAX_BYTES,
  ID_MAX_LENGTH as SESSION_ID_MAX_LENGTH,
  idFault as sessionIdFault,
} from '@dsh/session/limits'
import { describe, expect, it } from 'vitest'
import { EVENT_MAX_BYTES, ID_MAX_LENGTH, idFault } from '../src/limits.js'

// `@dsh/session` holds a session's appends and ids to the bounds every store
// enforces, and cannot import them from here (it comes first in the dependency order).

describe('the bounds of @dsh/session and of the protocol agree', () => {
  it('EVENT_MAX_BYTES is the same number in both', () => {
    expect(SESSION_EVENT_MAX_BYTES).toBe(EVENT_MAX_BYTES)
  })

  it('ID_MAX_LENGTH is the same number, and idFault gives the same answer for every kind of id', () => {
    expect(SESSION_ID_MAX_LENGTH).toBe(ID_MAX_LENGTH)
    const ids = [
      '',
      'a',
      '.',
      '..',
      '...',
      './a',
      'a/b',
      'x\u0000y',
      '\ud800',
      'a\udc00b',
      '\ud83d\ude00',
      'é',
      'a'.repeat(ID_MAX_LENGTH),
      'a'.repeat(ID_MAX_LENGTH + 1),
    ]
    for (const id of ids) expect([id, sessionIdFault(id)]).toEqual([id, idFault(id)])
    expect(ids.filter((id) => idFault(id) !== undefined)).toHaveLength(7)
  })
})
