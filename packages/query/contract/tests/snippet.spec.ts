import { describe, expect, it } from 'vitest'
import { markedSnippet, snippetMarkers } from '../src/backend-reads.js'

describe('markedSnippet', () => {
  const markers = { open: '<o>', close: '<c>' }

  it('turns each marked match into […] and says where each is; brackets of the text stay as they are, unmarked', () => {
    expect(markedSnippet('…<o>items<c>[0] and [x] <o>Items<c>', markers)).toEqual({
      snippet: '…[items][0] and [x] [Items]',
      marks: [
        [1, 8],
        [20, 27],
      ],
    })
    expect(markedSnippet('no match here', markers)).toEqual({ snippet: 'no match here', marks: [] })
  })

  it('drops a marker without its pair instead of showing it', () => {
    expect(markedSnippet('a <o>b', markers)).toEqual({ snippet: 'a b', marks: [] })
    expect(markedSnippet('a<c> <o>b<c> c<c>', markers)).toEqual({ snippet: 'a [b] c', marks: [[2, 5]] })
  })

  it("draws this process's markers once, from letters and digits only", () => {
    const { open, close } = snippetMarkers()
    expect(snippetMarkers()).toEqual({ open, close })
    expect(open).toMatch(/^[a-z0-9]{30,}$/)
    expect(close).toMatch(/^[a-z0-9]{30,}$/)
    expect(open.includes(close) || close.includes(open)).toBe(false)
    expect(markedSnippet(`x ${open}y${close} z`)).toEqual({ snippet: 'x [y] z', marks: [[2, 5]] })
  })
})
