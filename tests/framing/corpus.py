"""The framing corpus: raw requests where HTTP/1.1 parsers have been seen to disagree on where a request ends.

Sources of the cases (facts, not code): RFC 9112 (message framing, chunked coding, obs-fold, bare CR/LF), the
request-smuggling classes CL.TE, TE.CL and TE.TE (Linhart et al., "HTTP Request Smuggling", 2005; Kettle, "HTTP
Desync Attacks", 2019), chunk-extension and line-ending desyncs ("funky chunks", 2025), and the Adapter's own
issue list. Every request targets its own path, so a reading names which request it is.
"""

from __future__ import annotations

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"


def request(
    method: str = "GET",
    target: str = "/t",
    fields: bytes = b"Host: a\r\n",
    body: bytes = b"",
    version: bytes = b"HTTP/1.1",
) -> bytes:
    return method.encode() + b" " + target.encode() + b" " + version + b"\r\n" + fields + b"\r\n" + body


def post(fields: bytes, body: bytes, target: str = "/p") -> bytes:
    return request("POST", target, b"Host: a\r\n" + fields, body)


def chunked(body: bytes, target: str = "/p", extra: bytes = b"") -> bytes:
    return post(b"Transfer-Encoding: chunked\r\n" + extra, body, target)


CASES: dict[str, bytes] = {
    # --- the cases ---------------------------------------------------------------------------------------
    "te_value_vtab_prefix": post(b"Transfer-Encoding: \x0bchunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_value_ff_prefix": post(b"Transfer-Encoding: \x0cchunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_value_vtab_suffix": post(b"Transfer-Encoding: chunked\x0b\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_value_cr_prefix": post(b"Transfer-Encoding: \rchunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_value_on_next_line": post(b"Transfer-Encoding:\nchunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "chunk_extension_bare_lf": chunked(b"2;\nxx\r\nab\r\n0\r\n\r\n" + SMUGGLED),
    "trailer_bare_lf_swallows_request": chunked(b"0\r\nX-T: 1\n\n" + SMUGGLED),
    "http10_expect_continue": request(
        "POST", "/p", b"Host: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n", b"ab", b"HTTP/1.0"
    ),
    "http11_without_host": request("GET", "/t", b""),
    "http11_two_hosts": request("GET", "/t", b"Host: a\r\nHost: b\r\n"),
    # --- CL.TE and TE.CL ------------------------------------------------------------------------------------------
    "cl_te": post(b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\nG" + SMUGGLED),
    "te_cl": post(b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", b"8\r\nSMUGGLED\r\n0\r\n\r\n"),
    "cl_te_zero_length": post(b"Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", b"5\r\nhello\r\n0\r\n\r\n"),
    # --- TE.TE: a Transfer-Encoding one parser reads and the other does not ---------------------------------------
    "te_xchunked": post(b"Transfer-Encoding: xchunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_space_before_colon": post(b"Transfer-Encoding : chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_tab_before_value": post(b"Transfer-Encoding:\tchunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_twice_second_unknown": post(b"Transfer-Encoding: chunked\r\nTransfer-encoding: x\r\n", b"0\r\n\r\n"),
    "te_twice_chunked": post(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"),
    "te_chunked_then_identity": post(b"Transfer-Encoding: chunked, identity\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_identity_then_chunked": post(b"Transfer-Encoding: identity, chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_gzip_then_chunked": post(b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_upper_case": post(b"Transfer-Encoding: CHUNKED\r\n", b"3\r\nabc\r\n0\r\n\r\n"),
    "te_trailing_space": post(b"Transfer-Encoding: chunked \r\n", b"3\r\nabc\r\n0\r\n\r\n"),
    "te_quoted": post(b'Transfer-Encoding: "chunked"\r\n', b"0\r\n\r\n" + SMUGGLED),
    "te_after_bare_lf_header": post(b"X-A: b\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_obs_folded": post(b"Transfer-Encoding: \r\n chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_name_obs_folded": post(b"Transfer-Encoding\r\n : chunked\r\n", b"0\r\n\r\n" + SMUGGLED),
    "te_underscore_name_with_cl": post(b"Transfer_Encoding: chunked\r\nContent-Length: 5\r\n", b"0\r\n\r\n"),
    "te_in_http10": request("POST", "/p", b"Host: a\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n", b"HTTP/1.0"),
    # --- Content-Length ------------------------------------------------------------------------------------------
    "cl_plain": post(b"Content-Length: 3\r\n", b"abc"),
    "cl_twice_same": post(b"Content-Length: 3\r\nContent-Length: 3\r\n", b"abc"),
    "cl_twice_different": post(b"Content-Length: 3\r\nContent-Length: 4\r\n", b"abcd" + SMUGGLED),
    "cl_list_same": post(b"Content-Length: 3, 3\r\n", b"abc"),
    "cl_plus_sign": post(b"Content-Length: +3\r\n", b"abc"),
    "cl_negative": post(b"Content-Length: -3\r\n", b"abc"),
    "cl_hex": post(b"Content-Length: 0x3\r\n", b"abc"),
    "cl_inner_space": post(b"Content-Length: 1 2\r\n", b"abc" + b"x" * 9),
    "cl_empty": post(b"Content-Length: \r\n", b""),
    "cl_overflow": post(b"Content-Length: 99999999999999999999999\r\n", b"abc"),
    "cl_leading_zeros": post(b"Content-Length: 0003\r\n", b"abc"),
    "cl_space_before_colon": post(b"Content-Length : 3\r\n", b"abc"),
    "cl_trailing_space": post(b"Content-Length: 3 \r\n", b"abc"),
    "cl_shorter_body_then_request": post(b"Content-Length: 2\r\n", b"ab" + SMUGGLED),
    # --- chunk sizes, extensions, data and trailers ---------------------------------------------------------------
    "chunk_plain_then_request": chunked(b"3\r\nabc\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_size_upper_hex": chunked(b"A\r\n0123456789\r\n0\r\n\r\n"),
    "chunk_size_0x_prefix": chunked(b"0x3\r\nabc\r\n0\r\n\r\n"),
    "chunk_size_negative": chunked(b"-3\r\nabc\r\n0\r\n\r\n"),
    "chunk_size_leading_space": chunked(b" 3\r\nabc\r\n0\r\n\r\n"),
    "chunk_size_trailing_space": chunked(b"3 \r\nabc\r\n0\r\n\r\n"),
    "chunk_size_overflow": chunked(b"fffffffffffffffffffff\r\nabc\r\n0\r\n\r\n"),
    "chunk_size_bare_lf": chunked(b"3\nabc\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_size_leading_zeros": chunked(b"0003\r\nabc\r\n000\r\n\r\n"),
    "chunk_extension_valid": chunked(b"3;name=value\r\nabc\r\n0;last\r\n\r\n"),
    "chunk_extension_quoted": chunked(b'3;a="b;c"\r\nabc\r\n0\r\n\r\n'),
    "chunk_extension_bare_cr": chunked(b"3;\rxx\r\nabc\r\n0\r\n\r\n" + SMUGGLED),
    "chunk_extension_control_char": chunked(b"3;a\x01\r\nabc\r\n0\r\n\r\n"),
    "chunk_data_without_crlf": chunked(b"2\r\nabXX0\r\n\r\n"),
    "chunk_data_bare_lf": chunked(b"2\r\nab\n0\r\n\r\n" + SMUGGLED),
    "chunk_data_longer_than_size": chunked(b"1\r\nab\r\n0\r\n\r\n"),
    "trailer_valid": chunked(b"3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n" + SMUGGLED),
    "trailer_without_colon": chunked(b"0\r\nnot a field\r\n\r\n" + SMUGGLED),
    "trailer_obs_fold": chunked(b"0\r\nX-T: 1\r\n folded\r\n\r\n" + SMUGGLED),
    "trailer_looks_like_request": chunked(b"0\r\n" + SMUGGLED),
    "last_chunk_bare_lf_end": chunked(b"0\r\n\n" + SMUGGLED),
    # --- obs-fold, bare CR and LF, NUL and control characters -----------------------------------------------------
    "obs_fold_in_field": request("GET", "/t", b"Host: a\r\nX-A: b\r\n c\r\n"),
    "bare_lf_line_ends": b"GET /t HTTP/1.1\nHost: a\n\n",
    "bare_lf_head_end": b"GET /t HTTP/1.1\r\nHost: a\r\n\n" + SMUGGLED,
    "bare_cr_in_field": request("GET", "/t", b"Host: a\rX-A: b\r\n"),
    "bare_cr_request_line": b"GET /t HTTP/1.1\rHost: a\r\n\r\n",
    "nul_in_target": request("GET", "/t\x00x"),
    "nul_in_field_value": request("GET", "/t", b"Host: a\r\nX-A: b\x00c\r\n"),
    "nul_in_field_name": request("GET", "/t", b"Host: a\r\nX-\x00A: b\r\n"),
    "control_char_in_field_value": request("GET", "/t", b"Host: a\r\nX-A: b\x01c\r\n"),
    "del_in_field_value": request("GET", "/t", b"Host: a\r\nX-A: b\x7fc\r\n"),
    "tab_in_field_value": request("GET", "/t", b"Host: a\r\nX-A: b\tc\r\n"),
    "obs_text_in_field_value": request("GET", "/t", b"Host: a\r\nX-A: b\xe9c\r\n"),
    "space_in_target": request("GET", "/t x"),
    "high_byte_in_target": request("GET", "/t\xe9"),
    "space_before_first_field": request("GET", "/t", b" Host: a\r\n"),
    "space_before_colon": request("GET", "/t", b"Host : a\r\n"),
    "empty_field_name": request("GET", "/t", b"Host: a\r\n: b\r\n"),
    # --- request lines and versions -------------------------------------------------------------------------------
    "http09": b"GET /t\r\n\r\n",
    "http10": request("GET", "/t", b"", version=b"HTTP/1.0"),
    "http10_keep_alive_pipelined": request("GET", "/a", b"Connection: keep-alive\r\n", version=b"HTTP/1.0")
    + request("GET", "/b", b"", version=b"HTTP/1.0"),
    "http2_preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "http20_request_line": request("GET", "/t", version=b"HTTP/2.0"),
    "http12": request("GET", "/t", version=b"HTTP/1.2"),
    "http_lower_case": request("GET", "/t", version=b"http/1.1"),
    "http_version_two_digits": request("GET", "/t", version=b"HTTP/1.10"),
    "double_space_request_line": b"GET  /t HTTP/1.1\r\nHost: a\r\n\r\n",
    "trailing_space_request_line": b"GET /t HTTP/1.1 \r\nHost: a\r\n\r\n",
    "leading_crlf": b"\r\n" + request("GET", "/t"),
    "leading_space": b" " + request("GET", "/t"),
    "lower_case_method": request("get", "/t"),
    "unknown_method": request("BREW", "/t"),
    "method_with_bad_char": request("G(T", "/t"),
    # --- targets --------------------------------------------------------------------------------------------------
    "absolute_form": request("GET", "http://a/t?q=1"),
    "absolute_form_https_port": request("GET", "https://a:443/t"),
    "authority_form_get": request("GET", "a:80"),
    "asterisk_form_options": request("OPTIONS", "*"),
    "double_slash_target": request("GET", "//t"),
    "target_without_slash": request("GET", "t"),
    "fragment_in_target": request("GET", "/t#frag"),
    # --- pipelining and connection handling -----------------------------------------------------------------------
    "pipelined_gets": request("GET", "/a") + request("GET", "/b") + request("GET", "/c"),
    "pipelined_post_then_get": post(b"Content-Length: 3\r\n", b"abc", "/a") + request("GET", "/b"),
    "pipelined_chunked_then_get": chunked(b"3\r\nabc\r\n0\r\n\r\n", "/a") + request("GET", "/b"),
    "pipelined_then_garbage": request("GET", "/a") + b"garbage\r\n\r\n",
    "pipelined_close_in_middle": request("GET", "/a")
    + request("GET", "/b", b"Host: a\r\nConnection: close\r\n")
    + request("GET", "/c"),
    "expect_continue_http11": post(b"Expect: 100-continue\r\nContent-Length: 3\r\n", b"abc"),
    "expect_unknown": post(b"Expect: something\r\nContent-Length: 3\r\n", b"abc"),
    "upgrade_then_request": request("GET", "/a", b"Host: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n")
    + request("GET", "/b"),
    "connect_method": request("CONNECT", "a:443"),
}
