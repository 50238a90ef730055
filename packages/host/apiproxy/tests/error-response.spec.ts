import { DshError } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { API_ERROR_STATUS, ApiError, type ApiErrorCode } from '../src/errors.js'
import { toErrorResponse } from '../src/error-response.js'

describe('toErrorResponse', () => {
  it('answers every host code with its status and body', () => {
    for (const [code, status] of Object.entries(API_ERROR_STATUS)) {
      const response = toErrorResponse(new ApiError(code as ApiErrorCode, `because ${code}`))
      expect(response.status).toBe(status)
      expect(response.body).toEqual({ code, message: `because ${code}` })
    }
  })

  it('passes service codes through with the status they mean', () => {
    const cases: Array<[string, number]> = [
      ['SESSION_QUERY_NOT_FOUND', 404],
      ['SESSION_QUERY_INVALID_FILTER', 400],
      ['SESSION_QUERY_INVALID_CURSOR', 400],
      ['SESSION_QUERY_STALE_CURSOR', 409],
      ['SESSION_QUERY_CORRUPT_SESSION', 422],
      ['SESSION_QUERY_PERSISTENCE_FAILED', 503],
      ['SUBAGENT_NOT_FOUND', 404],
      ['SUBAGENT_INVALID_ARGUMENT', 400],
      ['SUBAGENT_CONTROL_QUERY_UNAVAILABLE', 503],
      ['SUBAGENT_UNAUTHORIZED', 403],
      ['SESSION_PERSISTENCE_LOCKED', 409],
      ['CANCELLED', 499],
      ['SOMETHING_ELSE', 500],
    ]
    for (const [code, status] of cases) {
      const response = toErrorResponse(new DshError(code, `message for ${code}`))
      expect([code, response.status]).toEqual([code, status])
      expect(response.body).toEqual({ code, message: `message for ${code}` })
    }
  })

  it('hides the details of unexpected errors and marks them as server faults', () => {
    const response = toErrorResponse(new TypeError('secret internal detail at /home/x'))
    expect(response.status).toBe(500)
    expect(response.body.code).toBe('API_INTERNAL')
    expect(response.body.message).not.toContain('secret')
    expect(response.serverFault).toBe(true)
    expect(toErrorResponse(new ApiError('API_NOT_FOUND', 'x')).serverFault).toBe(false)
    // Configured refusals are not faults; a failing persistence is.
    expect(toErrorResponse(new ApiError('API_SEARCH_UNAVAILABLE', 'x')).serverFault).toBe(false)
    expect(toErrorResponse(new ApiError('API_TOO_MANY_STREAMS', 'x')).serverFault).toBe(false)
    expect(toErrorResponse(new DshError('SESSION_QUERY_PERSISTENCE_FAILED', 'x')).serverFault).toBe(true)
  })
})
