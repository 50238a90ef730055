import { describe, expect, it } from 'vitest'
import { lazyDigest, requestDigest } from '../src/cursor.js'
import { parseListFilter, UNFILTERED_DIGEST } from '../src/filter.js'

describe('listing filter digests', () => {
  it('the written-out digest of an unfiltered listing is the computed one', () => {
    expect(UNFILTERED_DIGEST).toBe(requestDigest([null, null, null, null, null]))
  })

  it('no filter, an empty filter and a limit alone share that digest; any filter field changes it', () => {
    expect(parseListFilter(undefined).digest).toBe(UNFILTERED_DIGEST)
    expect(parseListFilter({}).digest).toBe(UNFILTERED_DIGEST)
    expect(parseListFilter({ limit: 5 }).digest).toBe(UNFILTERED_DIGEST)
    const digests = [
      parseListFilter({ parentSession: 's0' }).digest,
      parseListFilter({ origin: 'subagent' }).digest,
      parseListFilter({ cwd: '/w' }).digest,
    ]
    expect(new Set([UNFILTERED_DIGEST, ...digests]).size).toBe(4)
  })
})

describe('a filtered listing computes its digest when a cursor needs it', () => {
  it('the lazy digest is the request digest, computed once', () => {
    const parts = ['p', 'subagent', null, null, null]
    const digest = lazyDigest(parts)
    expect(digest()).toBe(requestDigest(parts))
    expect(digest()).toBe(digest())
    const filter = parseListFilter({ parentSession: 'p', origin: 'subagent' })
    expect(filter.digest).toBe(requestDigest(parts))
    expect(Object.keys(filter)).toContain('digest')
  })
})
