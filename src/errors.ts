// One error model: every failure is an ApiError carrying upstream's numeric code;
// errorBody() turns it into the contract's body (docs/contract.md) plus upstream's `code` and `error`.

import type { UnavailableReason } from "./metrics.js";

export const Code = {
  Unsupported: 0,
  NamespaceNotFound: 1,
  NamespaceAlreadyExists: 2,
  NamespaceNotEmpty: 3,
  TableNotFound: 4,
  TableAlreadyExists: 5,
  TableIndexNotFound: 6,
  TableIndexAlreadyExists: 7,
  TableTagNotFound: 8,
  TableTagAlreadyExists: 9,
  TransactionNotFound: 10,
  TableVersionNotFound: 11,
  TableColumnNotFound: 12,
  InvalidInput: 13,
  ConcurrentModification: 14,
  PermissionDenied: 15,
  Unauthenticated: 16,
  ServiceUnavailable: 17,
  Internal: 18,
  InvalidTableState: 19,
  TableSchemaValidationError: 20,
  Throttling: 21,
  TableBranchNotFound: 22,
  TableBranchAlreadyExists: 23,
} as const;
export type ErrorCode = (typeof Code)[keyof typeof Code];

const statusOfName = {
  Unsupported: 406,
  NamespaceNotFound: 404,
  NamespaceAlreadyExists: 409,
  NamespaceNotEmpty: 409,
  TableNotFound: 404,
  TableAlreadyExists: 409,
  TableIndexNotFound: 404,
  TableIndexAlreadyExists: 409,
  TableTagNotFound: 404,
  TableTagAlreadyExists: 409,
  TransactionNotFound: 404,
  TableVersionNotFound: 404,
  TableColumnNotFound: 404,
  InvalidInput: 400,
  ConcurrentModification: 409,
  PermissionDenied: 403,
  Unauthenticated: 401,
  ServiceUnavailable: 503,
  Internal: 500,
  InvalidTableState: 409,
  TableSchemaValidationError: 400,
  Throttling: 503,
  TableBranchNotFound: 404,
  TableBranchAlreadyExists: 409,
} satisfies Record<keyof typeof Code, number>;
const statusOfCode = new Map(Object.entries(statusOfName).map(([name, status]) => [Code[name as keyof typeof Code] as number, status]));

// The contract's error table (docs/contract.md), with Quiver's 405, 408, 413 and 415.
const kinds: Record<number, { type: string; title: string }> = {
  400: { type: "/errors/bad-request", title: "Malformed request" },
  401: { type: "/errors/unauthorized-request", title: "No valid authentication credentials for the operation" },
  403: { type: "/errors/forbidden-request", title: "Not authorized to make this request" },
  404: { type: "/errors/not-found-error", title: "Not found Error" },
  405: { type: "/errors/method-not-allowed", title: "Method not allowed" },
  408: { type: "/errors/request-timeout", title: "Request body not received in time" },
  406: { type: "/errors/unsupported-operation", title: "The server does not support this operation" },
  409: { type: "/errors/conflict", title: "The namespace has been concurrently modified" },
  413: { type: "/errors/payload-too-large", title: "Request body too large" },
  415: { type: "/errors/unsupported-media-type", title: "Unsupported media type" },
  500: { type: "/errors/server-error", title: "Internal Server Error" },
  503: { type: "/errors/service-unavailable", title: "Slow down" },
};

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Seconds a client should wait before retrying (503s), sent as Retry-After. */
  readonly retryAfterS?: number;
  /** For a 503, why. */
  readonly reason?: UnavailableReason;
  constructor(code: ErrorCode, message: string, status?: number, unavailable?: { retryAfterS?: number; reason?: UnavailableReason }) {
    super(message);
    this.code = code;
    this.status = status ?? statusOfCode.get(code) ?? 500;
    if (unavailable?.retryAfterS !== undefined) this.retryAfterS = unavailable.retryAfterS;
    if (unavailable?.reason !== undefined) this.reason = unavailable.reason;
  }
}

export const isApiError = (e: unknown): e is ApiError => e instanceof ApiError;

export const invalid = (message: string) => new ApiError(Code.InvalidInput, message);

/**
 * Failures of the request itself rather than of an operation, each with its own status. Upstream's
 * codes name none of them, so each carries the nearest: an endpoint or method the server does not
 * have is Unsupported, a body it will not take is InvalidInput.
 */
export const transport = {
  noRoute: (message: string) => new ApiError(Code.Unsupported, message, 404),
  methodNotAllowed: (message: string) => new ApiError(Code.Unsupported, message, 405),
  bodyTooSlow: (message: string) => new ApiError(Code.InvalidInput, message, 408),
  bodyTooLarge: (message: string) => new ApiError(Code.InvalidInput, message, 413),
  unsupportedMediaType: (message: string) => new ApiError(Code.InvalidInput, message, 415),
};
export const unsupported = (message: string) => new ApiError(Code.Unsupported, message);

export interface ErrorBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: number;
  error: string;
}

export function errorBody(err: ApiError, instance: string): ErrorBody {
  const kind = kinds[err.status] ?? kinds[500];
  return {
    type: kind.type,
    title: kind.title,
    status: err.status,
    detail: err.message,
    instance,
    code: err.code,
    error: err.message,
  };
}

/** An unexpected failure: the client sees a generic 500 naming the request id, never the cause. */
export function internal(requestId: string): ApiError {
  return new ApiError(Code.Internal, `internal error (request ${requestId})`);
}
