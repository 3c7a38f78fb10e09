# The "big executables" workload (tests/e2e/big_executables_test.cpp,
# bench/big_executables.cpp):
#   python3 llvm_calls.py SECONDS [LIBLLVM LIBCLANG_CPP [GO_FILE]]
#
# With the libraries: loads both (~0.9M and ~1M unwind rows) and creates and
# drops LLVM contexts and modules in a loop, so samples land in libLLVM's
# code as well as in the interpreter. Without: the interpreter loop alone.
# With GO_FILE: loads them only once that file exists (a test makes it once
# the profiler runs), then runs SECONDS.
import ctypes
import os
import sys
import time

if len(sys.argv) > 4:
    while not os.path.exists(sys.argv[4]):
        time.sleep(0.05)
end = time.time() + float(sys.argv[1])
if len(sys.argv) > 3:
    llvm = ctypes.CDLL(sys.argv[2])
    ctypes.CDLL(sys.argv[3])
    llvm.LLVMContextCreate.restype = ctypes.c_void_p
    llvm.LLVMContextDispose.argtypes = [ctypes.c_void_p]
    llvm.LLVMModuleCreateWithNameInContext.restype = ctypes.c_void_p
    llvm.LLVMModuleCreateWithNameInContext.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    llvm.LLVMDisposeModule.argtypes = [ctypes.c_void_p]
    while time.time() < end:
        context = llvm.LLVMContextCreate()
        for i in range(20):
            llvm.LLVMDisposeModule(llvm.LLVMModuleCreateWithNameInContext(b"m", context))
        llvm.LLVMContextDispose(context)
x = 0
while time.time() < end:
    x += 1
