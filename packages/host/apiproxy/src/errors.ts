import { DshError } from '@dsh/context'

export type ApiErrorCode =
  | 'API_UNAUTHORIZED'
  | 'API_FORBIDDEN'
  | 'API_NOT_FOUND'
  | 'API_BAD_REQUEST'
  | 'API_METHOD_NOT_ALLOWED'
  | 'API_MISDIRECTED_REQUEST'
  | 'API_PAYLOAD_TOO_LARGE'
  | 'API_URI_TOO_LONG'
  | 'API_HEADERS_TOO_LARGE'
  | 'API_REQUEST_TIMEOUT'
  | 'API_TOO_MANY_CONNECTIONS'
  | 'API_TOO_MANY_STREAMS'
  | 'API_SEARCH_UNAVAILABLE'
  | 'API_SERVICE_UNAVAILABLE'
  | 'API_INVALID_OPTIONS'
  | 'API_LISTEN_FAILED'
  | 'API_INTERNAL'

/** The HTTP status each of the host's own codes is sent with. */
export const API_ERROR_STATUS: Readonly<Record<ApiErrorCode, number>> = Object.freeze({
  API_UNAUTHORIZED: 401,
  API_FORBIDDEN: 403,
  API_NOT_FOUND: 404,
  API_BAD_REQUEST: 400,
  API_METHOD_NOT_ALLOWED: 405,
  API_MISDIRECTED_REQUEST: 421,
  API_PAYLOAD_TOO_LARGE: 413,
  API_URI_TOO_LONG: 414,
  API_HEADERS_TOO_LARGE: 431,
  API_REQUEST_TIMEOUT: 408,
  API_TOO_MANY_CONNECTIONS: 503,
  API_TOO_MANY_STREAMS: 503,
  API_SEARCH_UNAVAILABLE: 501,
  API_SERVICE_UNAVAILABLE: 503,
  API_INVALID_OPTIONS: 500,
  API_LISTEN_FAILED: 500,
  API_INTERNAL: 500,
})

/** The one error class of `@dsh/apiproxy`; `status` is the HTTP status it is answered with. */
export class ApiError extends DshError<ApiErrorCode> {
  get status(): number {
    return API_ERROR_STATUS[this.code]
  }
}
