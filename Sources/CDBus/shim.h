// libdbus-1's types and constants for Swift, declared here (as in dbus-1.0's public headers, whose ABI is
// stable) rather than included: the functions are looked up in libdbus-1.so.3 when a program first talks
// to D-Bus (McuMgrDBus/LibDBus.swift), so nothing links the library and no development package is needed
// to build. The DBUS_* macros are re-exported as CDBUS_* constants (Swift does not import the macros).
#ifndef CDBUS_SHIM_H
#define CDBUS_SHIM_H

typedef unsigned int dbus_uint32_t;
typedef dbus_uint32_t dbus_bool_t;

/// A connection to a bus (opaque).
typedef struct DBusConnection DBusConnection;
/// A message (opaque).
typedef struct DBusMessage DBusMessage;

/// An error (dbus-errors.h).
typedef struct DBusError {
    const char *name;
    const char *message;
    unsigned int dummy1 : 1;
    unsigned int dummy2 : 1;
    unsigned int dummy3 : 1;
    unsigned int dummy4 : 1;
    unsigned int dummy5 : 1;
    void *padding1;
} DBusError;

/// A message iterator (dbus-message.h): no public fields, its size is what matters.
typedef struct DBusMessageIter {
    void *dummy1;
    void *dummy2;
    dbus_uint32_t dummy3;
    int dummy4;
    int dummy5;
    int dummy6;
    int dummy7;
    int dummy8;
    int dummy9;
    int dummy10;
    int dummy11;
    int pad1;
    void *pad2;
    void *pad3;
} DBusMessageIter;

// Type codes (dbus-protocol.h).
static const int CDBUS_TYPE_INVALID = 0;
static const int CDBUS_TYPE_BYTE = 'y';
static const int CDBUS_TYPE_BOOLEAN = 'b';
static const int CDBUS_TYPE_INT16 = 'n';
static const int CDBUS_TYPE_UINT16 = 'q';
static const int CDBUS_TYPE_INT32 = 'i';
static const int CDBUS_TYPE_UINT32 = 'u';
static const int CDBUS_TYPE_INT64 = 'x';
static const int CDBUS_TYPE_UINT64 = 't';
static const int CDBUS_TYPE_DOUBLE = 'd';
static const int CDBUS_TYPE_STRING = 's';
static const int CDBUS_TYPE_OBJECT_PATH = 'o';
static const int CDBUS_TYPE_SIGNATURE = 'g';
static const int CDBUS_TYPE_UNIX_FD = 'h';
static const int CDBUS_TYPE_ARRAY = 'a';
static const int CDBUS_TYPE_VARIANT = 'v';
static const int CDBUS_TYPE_STRUCT = 'r';
static const int CDBUS_TYPE_DICT_ENTRY = 'e';

// Message types.
static const int CDBUS_MESSAGE_TYPE_INVALID = 0;
static const int CDBUS_MESSAGE_TYPE_METHOD_CALL = 1;
static const int CDBUS_MESSAGE_TYPE_METHOD_RETURN = 2;
static const int CDBUS_MESSAGE_TYPE_ERROR = 3;
static const int CDBUS_MESSAGE_TYPE_SIGNAL = 4;

// Flags and limits (dbus-shared.h, dbus-protocol.h).
static const int CDBUS_NAME_FLAG_DO_NOT_QUEUE = 0x4;
static const int CDBUS_NAME_FLAG_REPLACE_EXISTING = 0x2;
static const int CDBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER = 1;
static const int CDBUS_MAXIMUM_ARRAY_LENGTH = 67108864;

#endif
