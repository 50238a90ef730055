import { EVENT_MAX_BYTES as SESSION_EVENT_MAX_BYTES } from '@dsh/session/limits'
import { describe, expect, it } from 'vitest'
import { EVENT_MAX_BYTES } from '../src/limits.js'

// `@dsh/session` holds a session's appends to the bound every store enforces,
// and cannot import it from here (it comes first in the dependency order).

describe('the event bound of @dsh/session and of the protocol agree', () => {
  it('EVENT_MAX_BYTES is the same number in both', () => {
    expect(SESSION_EVENT_MAX_BYTES).toBe(EVENT_MAX_BYTES)
  })
})
